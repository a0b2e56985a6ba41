// An exec terminal (xterm.js, loaded only when a terminal opens) over the exec stream. On a TTY
// (`tty=true`, the default) keystrokes go to the process as they are and a resize is a binary
// frame {"type":"resize","rows","cols"}; without one the terminal edits the line locally (echo,
// backspace), sends it on Enter, and Ctrl-D ends the input.
import { useEffect, useRef, useState } from "preact/hooks";
import { wsUrl } from "./live.ts";

interface ExecFrame {
  type: string;
  output?: string;
  streamType?: string;
  data?: { errorMessage?: string };
}

export function Terminal(props: { execPath: string }) {
  const host = useRef<HTMLDivElement>(null);
  const [command, setCommand] = useState("sh");
  const [tty, setTty] = useState(true);
  const [session, setSession] = useState(0);
  const [status, setStatus] = useState("closed");

  useEffect(() => {
    if (session === 0 || !host.current) return;
    let disposed = false;
    let cleanup = () => {};
    void (async () => {
      const [{ Terminal: XTerm }, { FitAddon }] = await Promise.all([
        import("@xterm/xterm"),
        import("@xterm/addon-fit"),
      ]);
      if (disposed || !host.current) return;
      host.current.textContent = "";
      const term = new XTerm({
        convertEol: true,
        cursorBlink: true,
        fontSize: 13,
        rows: 20,
        scrollback: 5000,
      });
      const fit = new FitAddon();
      term.loadAddon(fit);
      term.open(host.current);
      fit.fit();
      setStatus("connecting");
      const size = tty ? `&tty=true&rows=${term.rows}&cols=${term.cols}` : "";
      const ws = new WebSocket(wsUrl(`${props.execPath}?command=${encodeURIComponent(command)}${size}`));
      const onResize = () => {
        fit.fit();
        if (tty && ws.readyState === WebSocket.OPEN)
          ws.send(
            new TextEncoder().encode(JSON.stringify({ type: "resize", rows: term.rows, cols: term.cols })),
          );
      };
      window.addEventListener("resize", onResize);
      // The host's size also changes without the window's (a layout that settles after the terminal
      // opened, a side panel): a terminal fitted too early would stay narrow, wrapping every line.
      const observer = typeof ResizeObserver === "undefined" ? undefined : new ResizeObserver(onResize);
      observer?.observe(host.current);
      let line = "";
      ws.onopen = () => {
        setStatus("connected");
        // The size asked for at connect may have changed while the connection opened.
        onResize();
        term.focus();
      };
      ws.onmessage = (m) => {
        let f: ExecFrame;
        try {
          f = JSON.parse(String(m.data)) as ExecFrame;
        } catch {
          return;
        }
        if (f.type === "exec" && f.output)
          term.write(f.streamType === "stderr" ? `\x1b[31m${f.output}\x1b[0m` : f.output);
        if (f.type === "error") term.write(`\r\n\x1b[31m${f.data?.errorMessage ?? "error"}\x1b[0m\r\n`);
      };
      ws.onclose = (e) => {
        const code = /exit_code=(\d+)/.exec(e.reason)?.[1];
        setStatus(
          code === undefined ? `ended${e.reason ? `: ${e.reason}` : ""}` : `exited with code ${code}`,
        );
        term.write("\r\n\x1b[90m[the process ended]\x1b[0m\r\n");
      };
      const input = term.onData((d) => {
        if (ws.readyState !== WebSocket.OPEN) return;
        if (tty) {
          ws.send(d);
          return;
        }
        for (const ch of d) {
          if (ch === "\r") {
            term.write("\r\n");
            ws.send(`${line}\n`);
            line = "";
          } else if (ch === "\u007f") {
            if (line.length > 0) {
              line = line.slice(0, -1);
              term.write("\b \b");
            }
          } else if (ch === "\u0004") {
            if (line) ws.send(line);
            line = "";
            ws.send("\u0004");
          } else if (ch >= " ") {
            line += ch;
            term.write(ch);
          }
        }
      });
      cleanup = () => {
        input.dispose();
        window.removeEventListener("resize", onResize);
        observer?.disconnect();
        ws.close();
        term.dispose();
      };
    })();
    return () => {
      disposed = true;
      cleanup();
    };
  }, [session]);

  return (
    <section class="terminal" aria-label="Terminal">
      <div class="log-bar">
        <h2>Terminal</h2>
        <label>
          Command <input value={command} onInput={(e) => setCommand((e.target as HTMLInputElement).value)} />
        </label>
        <label>
          <input
            type="checkbox"
            checked={tty}
            onChange={(e) => setTty((e.target as HTMLInputElement).checked)}
          />{" "}
          TTY
        </label>
        <button type="button" onClick={() => setSession((s) => s + 1)}>
          {session === 0 ? "Open terminal" : "Restart"}
        </button>
        <span class="log-status">{status}</span>
      </div>
      <div class="xterm-host" ref={host} />
    </section>
  );
}
