// Delivery of confirmation messages over SMTP (BERTH_SMTP_URL), against a tiny SMTP server
// started here on 127.0.0.1; and what the API answers when the mail server refuses.
import assert from "node:assert/strict";
import net from "node:net";
import { after, before, describe, test } from "node:test";
import { MailDeliveryError, SmtpOutbox } from "../../src/accounts/outbox.ts";
import { type Caller, call, createUser, type Harness, startHarness } from "../support/harness.ts";
import { tokenInText } from "./support.ts";

interface Received {
  from: string;
  to: string[];
  data: string;
  auth?: string;
}

/** Speaks just enough SMTP (RFC 5321) to accept messages; `refuse` makes it reject RCPT TO. */
class TinySmtpServer {
  readonly received: Received[] = [];
  readonly commands: string[] = [];
  refuse = false;
  private readonly server = net.createServer((socket) => this.session(socket));

  async start(): Promise<number> {
    await new Promise<void>((r) => this.server.listen(0, "127.0.0.1", r));
    return (this.server.address() as net.AddressInfo).port;
  }

  async stop(): Promise<void> {
    await new Promise<void>((r) => this.server.close(() => r()));
  }

  private session(socket: net.Socket): void {
    let buffer = "";
    let inData = false;
    let current: Received = { from: "", to: [], data: "" };
    const reply = (line: string) => socket.write(`${line}\r\n`);
    reply("220 tiny.test ESMTP ready");
    socket.on("data", (chunk) => {
      buffer += chunk.toString("utf8");
      for (;;) {
        if (inData) {
          const end = buffer.indexOf("\r\n.\r\n");
          if (end === -1) return;
          current.data = buffer.slice(0, end);
          buffer = buffer.slice(end + 5);
          inData = false;
          this.received.push(current);
          current = { from: "", to: [], data: "", auth: current.auth };
          reply("250 2.0.0 queued");
          continue;
        }
        const i = buffer.indexOf("\r\n");
        if (i === -1) return;
        const line = buffer.slice(0, i);
        buffer = buffer.slice(i + 2);
        this.commands.push(line);
        const verb = line.slice(0, 4).toUpperCase();
        if (verb === "EHLO") {
          reply("250-tiny.test greets you");
          reply("250-8BITMIME");
          reply("250 AUTH PLAIN");
        } else if (verb === "AUTH") {
          current.auth = Buffer.from(line.split(" ")[2] ?? "", "base64").toString("utf8");
          reply("235 2.7.0 accepted");
        } else if (verb === "MAIL") {
          current.from = /<(.*)>/.exec(line)?.[1] ?? "";
          reply("250 2.1.0 ok");
        } else if (verb === "RCPT") {
          if (this.refuse) reply("550 5.1.1 no such mailbox");
          else {
            current.to.push(/<(.*)>/.exec(line)?.[1] ?? "");
            reply("250 2.1.5 ok");
          }
        } else if (verb === "DATA") {
          inData = true;
          reply("354 end with <CRLF>.<CRLF>");
        } else if (verb === "QUIT") {
          reply("221 2.0.0 bye");
          socket.end();
        } else reply("502 5.5.2 not implemented");
      }
    });
    socket.on("error", () => undefined);
  }
}

const smtp = new TinySmtpServer();
let port: number;
let h: Harness;
let alice: Caller;

before(async () => {
  port = await smtp.start();
  h = await startHarness({
    env: {
      BERTH_SMTP_URL: `smtp://127.0.0.1:${port}`,
      BERTH_MAIL_FROM: "berth@berth.example.test",
      BERTH_EMAIL_VERIFY_INTERVAL_S: "0",
    },
  });
  alice = await createUser(h, "alice");
});

after(async () => {
  await h.close();
  await smtp.stop();
});

describe("SMTP delivery", () => {
  test("verify sends the confirmation message over SMTP; its token confirms the address", async () => {
    await call(h, alice, "POST", "/api/v1.1/users/alice/emails/", { email: "alice@smtp.test" });
    const res = await call(h, alice, "POST", "/api/v1.1/users/alice/emails/verify/", {
      email: "alice@smtp.test",
    });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    const msg = smtp.received.at(-1)!;
    assert.equal(msg.from, "berth@berth.example.test");
    assert.deepEqual(msg.to, ["alice@smtp.test"]);
    assert.match(msg.data, /^From: berth@berth\.example\.test\r\n/m);
    assert.match(msg.data, /^To: alice@smtp\.test\r\n/m);
    assert.match(msg.data, /^Subject: Confirm your email address\r\n/m);
    assert.ok(smtp.commands.includes("QUIT"));

    const confirmed = await call(h, undefined, "POST", "/api/v1.1/emails/confirm/", {
      token: tokenInText(msg.data),
    });
    assert.equal(confirmed.status, 200);
    assert.equal(confirmed.body.verified, true);
  });

  test("a refusing mail server: 503 mail_unavailable, and the undelivered token is dropped", async () => {
    await call(h, alice, "POST", "/api/v1.1/users/alice/emails/", { email: "alice@refused.test" });
    smtp.refuse = true;
    try {
      const res = await call(h, alice, "POST", "/api/v1.1/users/alice/emails/verify/", {
        email: "alice@refused.test",
      });
      assert.equal(res.status, 503);
      assert.equal(res.body.code, "mail_unavailable");
      assert.match(res.body.error, /550/);
    } finally {
      smtp.refuse = false;
    }
    const rows = await h.store.db
      .selectFrom("email_tokens")
      .selectAll()
      .where("email", "=", "alice@refused.test")
      .execute();
    assert.equal(rows.length, 0);
  });
});

describe("SmtpOutbox", () => {
  test("dot-stuffs lines that start with a dot and authenticates with AUTH PLAIN", async () => {
    const box = new SmtpOutbox({ url: `smtp://mailer:s%40cret@127.0.0.1:${port}`, from: "a@b.test" });
    await box.send({ to: "c@d.test", subject: "dots", text: "first\n.second\n..third\nlast" });
    const msg = smtp.received.at(-1)!;
    assert.equal(msg.auth, "\0mailer\0s@cret");
    assert.match(msg.data, /\r\n\r\nfirst\r\n\.\.second\r\n\.\.\.third\r\nlast$/);
  });

  test("refuses header values with line breaks before connecting", async () => {
    const box = new SmtpOutbox({ url: `smtp://127.0.0.1:${port}`, from: "a@b.test" });
    const before = smtp.commands.length;
    await assert.rejects(
      box.send({ to: "c@d.test\r\nBcc: e@f.test", subject: "x", text: "y" }),
      MailDeliveryError,
    );
    assert.equal(smtp.commands.length, before);
  });

  test("a server that does not answer is an error, not a hang", async () => {
    const closed = net.createServer((s) => s.destroy());
    await new Promise<void>((r) => closed.listen(0, "127.0.0.1", r));
    const p = (closed.address() as net.AddressInfo).port;
    const box = new SmtpOutbox({ url: `smtp://127.0.0.1:${p}`, from: "a@b.test", timeoutMs: 500 });
    await assert.rejects(box.send({ to: "c@d.test", subject: "x", text: "y" }), MailDeliveryError);
    await new Promise<void>((r) => closed.close(() => r()));
    const silent = net.createServer(() => undefined);
    await new Promise<void>((r) => silent.listen(0, "127.0.0.1", r));
    const sp = (silent.address() as net.AddressInfo).port;
    const slow = new SmtpOutbox({ url: `smtp://127.0.0.1:${sp}`, from: "a@b.test", timeoutMs: 300 });
    await assert.rejects(slow.send({ to: "c@d.test", subject: "x", text: "y" }), /no answer within 300 ms/);
    silent.close();
  });
});
