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

# Sourced by the device-call scripts (gpu_session.sh, gpu_whole_models.sh): one step of a call, with its own time
# limit so one slow step cannot starve the others; its output goes to $o/NAME.log, whose tail is printed. SKIP="a b"
# leaves steps out.
#   gpu_step NAME SECONDS command [args...]
gpu_step() {
  local name=$1 secs=$2
  shift 2
  case " ${SKIP:-} " in *" $name "*) echo "=== $name skipped"; return;; esac
  echo "=== $name (limit ${secs}s) $(date -u +%H:%M:%S)"
  timeout "$secs" "$@" > "$o/$name.log" 2>&1
  echo "=== $name exit $? $(date -u +%H:%M:%S)"
  tail -n "${TAIL:-15}" "$o/$name.log"
}
