# The platform layer (issue 37): OS-specific calls only in common/platform_*.c, and the rest
# of the tree compiles as POSIX.1-2008 + XSI without _GNU_SOURCE. A consistency check of the
# tree, not of behaviour: the I/O tests (force, resume, split, ...) and make verify show the
# calls behind common/platform.h do what they did.
"$ROOT/scripts/check-platform" "$ROOT" || exit 1
make -s -C "$ROOT" --no-print-directory posix-syntax || { echo "posix-syntax: a file outside common/platform_*.c needs more than POSIX.1-2008" >&2; exit 1; }
echo ok
