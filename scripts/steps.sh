# Sourced by the setup scripts: run_step prints one progress line for a step and sends the step's own output to a
# log file, printing the log's tail when the step fails.
#   run_step LOG "what it does" command [args...]
run_step() {
  local log=$1 what=$2 script
  shift 2
  script="$(basename "${BASH_SOURCE[1]}" .sh)"
  echo "$script: $what"
  if ! "$@" >>"$log" 2>&1; then
    echo "$script: failed: $what (last lines of $log below)" >&2
    tail -n 40 "$log" >&2
    return 1
  fi
}
