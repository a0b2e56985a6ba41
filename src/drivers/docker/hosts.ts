// Rewriting a running container's link host entries. Docker writes `--add-host` entries into the
// container's /etc/hosts (a file it bind-mounts, so it can be rewritten in place but not
// replaced) once, at create, and has no API to change them later. The only way in is a command in
// the container: a fixed script run by the image's `sh`, with the entries as its arguments (data,
// never part of a shell string). Lines it adds end with a marker so the next call finds them.

/** Ends every line the script appends. */
const MARKER = "# berth-link";

/**
 * `sh -c HOSTS_SCRIPT berth-hosts <n> <n lines to drop> <lines to add…>`: keeps every line of
 * /etc/hosts except the marked ones and those exactly equal to a line to drop, then appends the new
 * lines with the marker, and writes the file back in place.
 */
export const HOSTS_SCRIPT = `n=$1; shift
drop='
'
while [ "$n" -gt 0 ]; do drop="$drop$1
"; shift; n=$((n-1)); done
out=''
while IFS= read -r line || [ -n "$line" ]; do
  case "$line" in *"${MARKER}") continue ;; esac
  case "$drop" in *"
$line
"*) continue ;; esac
  out="$out$line
"
done < /etc/hosts
for e in "$@"; do out="$out$e	${MARKER}
"; done
printf '%s' "$out" > /etc/hosts
`;

/** `host:ip` (the extra-hosts form) → Docker's hosts line `ip<TAB>host`. */
export function hostsLine(entry: string): string {
  const i = entry.indexOf(":");
  return `${entry.slice(i + 1)}\t${entry.slice(0, i)}`;
}

/** The exec command that replaces `remove` with `add`. */
export function hostsCommand(entries: { remove: readonly string[]; add: readonly string[] }): string[] {
  return [
    "sh",
    "-c",
    HOSTS_SCRIPT,
    "berth-hosts",
    String(entries.remove.length),
    ...entries.remove.map(hostsLine),
    ...entries.add.map(hostsLine),
  ];
}
