# Where the inputs of each fuzz target (tests/fuzz/fuzz_TARGET.c) live; sourced by
# tests/run-tests (which replays them) and scripts/fuzz (which starts libFuzzer from them).
#
#   fuzz_seed_dirs ROOT TARGET   the committed seed corpora of TARGET, one a line:
#                                ROOT/tests/fuzz/corpus/TARGET and, for gguf_model (a GGUF
#                                file opened as a model), the gguf corpus as well; for family
#                                (a config.json in a model of its family), the config corpus
#   fuzz_regress_dir ROOT TARGET where an input that once failed is kept (a test forever)

fuzz_seed_dirs() {
  echo "$1/tests/fuzz/corpus/$2"
  case $2 in
    gguf_model) echo "$1/tests/fuzz/corpus/gguf" ;;
    family) echo "$1/tests/fuzz/corpus/config" ;;
  esac
}

fuzz_regress_dir() { echo "$1/tests/fuzz/regress/$2"; }
