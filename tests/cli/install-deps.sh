# scripts/install-deps (make deps, and make on a machine without the libraries) names every
# package it will install with its reason before installing it, installs only what is
# missing of the set asked for (build < check), and nothing under --dry-run; make names the
# libraries pkg-config misses and runs it with 'check'. apt-get, dpkg-query and pkg-config
# are stubs here (nothing is installed): MISSING lists the packages the stub dpkg-query
# reports as not installed. The brew branch (macOS) runs with a stub brew at the end.
. "$ROOT/tests/lib/common.sh"
set -u
mkdir stub
cat > stub/dpkg-query <<'SH'
#!/bin/sh
for a; do last=$a; done
for p in $MISSING; do [ "$p" = "$last" ] && exit 1; done
echo "install ok installed"
SH
cat > stub/apt-get <<'SH'
#!/bin/sh
echo "APT $*" >> "$LOG"
SH
printf '#!/bin/sh\n"$@"\n' > stub/sudo
chmod +x stub/*
export PATH="$PWD/stub:$PATH" LOG="$PWD/log"

# check: the missing packages of build and check, listed with reasons, then installed
: > log
MISSING="libzstd-dev zsh bc" "$ROOT/scripts/install-deps" check 2>> log || fail "install-deps check failed: $(cat log)"
grep -E '^  libzstd-dev +zstd library: bundles \(tq-verify pack\) \(build\)$' log >/dev/null || fail "libzstd-dev not listed with its reason: $(cat log)"
grep -E '^  zsh +loads the zsh completions \(tests/cli/completions.sh\) \(check\)$' log >/dev/null || fail "zsh not listed: $(cat log)"
grep -E '^  bc ' log >/dev/null && fail "bc (bench only) listed for check: $(cat log)"
grep -x 'APT install -y -qq libzstd-dev zsh' log >/dev/null || fail "apt-get not asked for exactly the missing packages: $(cat log)"
# the list comes before apt-get runs
[ "$(grep -n 'will install' log | cut -d: -f1)" -lt "$(grep -n '^APT update' log | cut -d: -f1)" ] || fail "installed before listing: $(cat log)"

# build: only the library
: > log
MISSING="libzstd-dev zsh bc" "$ROOT/scripts/install-deps" build 2>> log || fail "install-deps build failed"
grep -x 'APT install -y -qq libzstd-dev' log >/dev/null || fail "build set: $(cat log)"

# --dry-run lists and installs nothing; nothing missing: silent, no apt-get
: > log
MISSING="zsh" "$ROOT/scripts/install-deps" --dry-run 2>> log || fail "--dry-run failed"
grep -E '^  zsh ' log >/dev/null || fail "--dry-run did not list zsh: $(cat log)"
grep '^APT' log >/dev/null && fail "--dry-run ran apt-get: $(cat log)"
: > log
MISSING="" "$ROOT/scripts/install-deps" check 2>> log || fail "nothing missing: failed"
[ ! -s log ] || fail "nothing missing, yet: $(cat log)"
MISSING="" "$ROOT/scripts/install-deps" bogus 2>/dev/null; [ $? -eq 2 ] || fail "an unknown set is not a usage error"

# make, with pkg-config missing libzstd: names it, then installs the check set's missing packages
cat > stub/pkg-config <<'SH'
#!/bin/sh
for a; do [ "$a" = libzstd ] && exit 1; done
exit 0
SH
chmod +x stub/pkg-config
: > log
MISSING="libzstd-dev" make -n -s --no-print-directory -C "$ROOT" BUILD="$PWD/b" BIN="$PWD/bin" metal-note > make.out 2>> log ||
  fail "make failed: $(cat log)"
grep 'tq: pkg-config cannot find libzstd; running scripts/install-deps check' make.out log >/dev/null || fail "make did not name the library: $(cat make.out log)"
grep -x 'APT install -y -qq libzstd-dev' log >/dev/null || fail "make did not install it: $(cat log)"
# make deps runs it on request (and never on its own as a side effect of parsing)
: > log
MISSING="zsh" make -s --no-print-directory -C "$ROOT" BUILD="$PWD/b" BIN="$PWD/bin" deps > make.out 2>> log || fail "make deps failed: $(cat log)"
grep -x 'APT install -y -qq zsh' log >/dev/null || fail "make deps: $(cat log)"
[ "$(grep -c '^APT install' log)" = 1 ] || fail "make deps installed twice: $(cat log)"

# brew (macOS): a PATH without apt-get, a stub brew that reports MISSING as not installed.
# Asks brew for the formula names of BREW_TABLE (pkgconf, not its alias pkg-config), installs
# only the missing ones of the set, and names the keg-only kegs for PKG_CONFIG_PATH.
mkdir brewpath
cat > brewpath/brew <<'SH'
#!/bin/sh
case $1 in
list) for p in $MISSING; do [ "$p" = "$3" ] && exit 1; done; echo "$3 1.0"; exit 0 ;;
--prefix) echo "/opt/homebrew/opt/$2"; exit 0 ;;
*) echo "BREW $*" >> "$LOG" ;;
esac
SH
chmod +x brewpath/brew
ln -s "$(command -v cut)" brewpath/cut
: > log
MISSING="pkgconf libarchive node" PATH="$PWD/brewpath" "$ROOT/scripts/install-deps" check 2>> log || fail "brew: install-deps check failed: $(cat log)"
grep -x 'BREW install pkgconf libarchive' log >/dev/null || fail "brew not asked for exactly the missing formulae: $(cat log)"
grep -F 'PKG_CONFIG_PATH: /opt/homebrew/opt/openssl@3/lib/pkgconfig:/opt/homebrew/opt/libarchive/lib/pkgconfig' log >/dev/null ||
  fail "brew: the keg-only pkgconfig folders are not named: $(cat log)"
: > log
MISSING="" PATH="$PWD/brewpath" "$ROOT/scripts/install-deps" check 2>> log || fail "brew, nothing missing: failed"
[ ! -s log ] || fail "brew, nothing missing, yet: $(cat log)"
