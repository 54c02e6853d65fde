# Reading tq's --json reports in shell, for the CLI tests and the benchmarks (sourced).
#
#   jget FILE KEY   the value of top-level KEY: tq_json_print writes one key a line, indented
#                   two spaces, so no JSON tool is needed. Strings come without their quotes,
#                   arrays and numbers as written, without the trailing comma.

jget() { sed -n "s/^  \"$2\": \(.*\)$/\1/p" "$1" | sed 's/,$//; s/^"//; s/"$//'; }
