# Sourced (not run) by the training scripts (e2c_sft.sh, e2c_rl.sh): checks of their environment variables
# that name the variable, since past this point an error would name the Python flag the script passes on.
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
