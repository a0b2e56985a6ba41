// The terminal of a fake exec with a tty: the kernel's canonical line discipline, as far as a
// terminal in a browser needs it. Enter sends "\r", which becomes "\n" (ICRNL); what is typed is
// echoed, a newline as "\r\n" (ONLCR); Backspace erases the last character, Ctrl-U the line;
// a line reaches the program only when it ends; Ctrl-D on an empty line is the end of input;
// Ctrl-C drops the line. Escape sequences (arrow keys) are not line editing here: they are dropped.

export interface TtyEnds {
  /** What the terminal shows (the echo). */
  echo(text: string): void;
  /** What the program reads. */
  deliver(text: string): void;
  /** The end of input (Ctrl-D on an empty line). */
  end(): void;
}

export class LineDiscipline {
  private line = "";
  /** Inside an escape sequence: "esc" after ESC, "csi" after ESC [, "ss3" after ESC O. */
  private escape: "" | "esc" | "csi" | "ss3" = "";
  private ended = false;

  constructor(private readonly ends: TtyEnds) {}

  input(text: string): void {
    let echo = "";
    for (const ch of text) {
      if (this.ended) break;
      if (this.escape) {
        if (this.escape === "esc") this.escape = ch === "[" ? "csi" : ch === "O" ? "ss3" : "";
        else if (this.escape === "ss3" || (ch >= "@" && ch <= "~")) this.escape = "";
        continue;
      }
      if (ch === "\x1b") {
        this.escape = "esc";
      } else if (ch === "\r" || ch === "\n") {
        echo += "\r\n";
        this.flush(echo, `${this.line}\n`);
        echo = "";
      } else if (ch === "\x7f" || ch === "\b") {
        if (this.line.length > 0) {
          this.line = this.line.slice(0, -1);
          echo += "\b \b";
        }
      } else if (ch === "\x15") {
        echo += "\b \b".repeat(this.line.length);
        this.line = "";
      } else if (ch === "\x03") {
        echo += "^C\r\n";
        this.line = "";
      } else if (ch === "\x04") {
        if (this.line === "") {
          if (echo) this.ends.echo(echo);
          echo = "";
          this.ended = true;
          this.ends.end();
        } else {
          this.flush(echo, "");
          echo = "";
        }
      } else if (ch >= " " || ch === "\t") {
        this.line += ch;
        echo += ch;
      }
    }
    if (echo) this.ends.echo(echo);
  }

  /** Shows the echo so far, then hands the line (and `suffix`) to the program. */
  private flush(echo: string, text: string): void {
    if (echo) this.ends.echo(echo);
    const line = text || this.line;
    this.line = "";
    this.ends.deliver(line);
  }
}
