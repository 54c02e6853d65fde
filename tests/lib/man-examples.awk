# tests/lib/man-examples.awk — prints the commands of a man page's EXAMPLES section, one a line: the
# "$ " lines of .EX blocks, every line of .nf and .RS blocks; roff escapes undone, "\e" line
# continuations joined (tests/cli/man-examples.sh).
/^\.SH/ { f = ($0 ~ /^\.SH EXAMPLES/); next }
!f { next }
/^\.(EX)/ { mode = "ex"; next }
/^\.(nf|RS)/ { mode = "nf"; next }
/^\.(EE|fi|RE)/ { mode = ""; next }
/^\./ { next }
mode == "" { next }
{
  line = $0
  if (mode == "ex") { if (line !~ /^\$ /) next; sub(/^\$ /, "", line) }
  sub(/^[ \t]+/, "", line)
  gsub(/\\-/, "-", line); gsub(/\\&/, "", line); gsub(/\\\(aq/, "'", line); gsub(/\\\(dq/, "\"", line)
  gsub(/\\e/, "\\", line)
  if (cont != "") { line = cont " " line; cont = "" }
  if (line ~ /\\$/) { sub(/[ \t]*\\$/, "", line); cont = line; next }
  print line
}
