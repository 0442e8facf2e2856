# Sourced (not run) by the training scripts (e2c_sft.sh, e2c_rl.sh, e2c_dapo.sh, ef-sft.sh): checks of their
# environment variables that name the variable, since past this point an error would name the Python flag
# the script passes on, and of the flag a script fixes.
#
#   e2c_check_whole VAR LOW [HIGH]   $VAR, when set and not empty, is a whole number from LOW to HIGH
#                                    (default: no upper bound); otherwise one `error:` line, exit 2

e2c_check_whole() {
  local var="$1" low="$2" high="${3:-}" val="${!1:-}"
  [ -n "$val" ] || return 0
  if ! [[ "$val" =~ ^-?[0-9]+$ ]]; then
    echo "error: $var must be a whole number, got '$val'" >&2
    exit 2
  fi
  # A number too long for the shell's arithmetic (which would print an error of its own) is out of range.
  if [ "${#val}" -gt 15 ] || [ "$val" -lt "$low" ] || { [ -n "$high" ] && [ "$val" -gt "$high" ]; }; then
    if [ -n "$high" ]; then
      echo "error: $var must be a whole number from $low to $high, got '$val'" >&2
    else
      echo "error: $var must be a whole number >= $low, got '$val'" >&2
    fi
    exit 2
  fi
}

#   e2c_fixed_flag SCRIPT FLAG SHORTEST VALUE HINT "$@"
#                                    SCRIPT runs FLAG VALUE (e2c_dapo.sh: --algo dapo): FLAG with another value
#                                    among the arguments before `--` (as FLAG V, FLAG=V, or an abbreviation
#                                    argparse takes, at least as long as SHORTEST) is one `error:` line naming
#                                    HINT (the script for that), exit 2; FLAG VALUE itself is harmless

e2c_fixed_flag() {
  local script="$1" flag="$2" shortest="$3" value="$4" hint="$5" arg name given
  shift 5
  while [ $# -gt 0 ]; do
    arg="$1"
    shift
    [ "$arg" = -- ] && return 0
    name="${arg%%=*}"
    # name is FLAG or a prefix of it (argparse's abbreviation) no shorter than SHORTEST
    if [ "${#name}" -ge "${#shortest}" ] && [ "${flag#"$name"}" != "$flag" ]; then
      if [ "$name" != "$arg" ]; then
        given="${arg#*=}"
      elif [ $# -gt 0 ]; then
        given="$1"
        shift
      else
        return 0  # no value: the parser names it
      fi
      if [ "$given" != "$value" ]; then
        echo "error: $script runs $flag $value, so $flag ${given@Q} is refused; $hint" >&2
        exit 2
      fi
    fi
  done
}
