// A scriptable ACP client built on the official TypeScript SDK (@agentclientprotocol/sdk): it
// spawns the agent, connects through the SDK's client app, and bridges the test (pytest) to it
// with JSON lines: commands on our stdin, everything the agent does on our stdout.
//
// env: ACP_SDK      the SDK's entry (…/node_modules/@agentclientprotocol/sdk/dist/v1/stable/acp.js)
//      ACP_AGENT    the agent's argv as a JSON array
//      ACP_CWD      the agent's working directory
//      ACP_WIRE     a file that gets every byte the agent writes to stdout (the secret check)
//
// commands: {op: "request", id, method, params}  -> {type: "response", id, result} | {type: "error", id, error}
//           {op: "notify", method, params}
//           {op: "permissions", answers: [...], otherwise}  answers: "allow" | "allowSession" | "allowAlways" | "deny" |
//               "cancelled" | "never" (never answered) | "ask" (sent to the test; it answers with
//               {op: "answer", key, response})
//           {op: "answer", key, response}
//           {op: "close"}  -> ends the agent's stdin, then {type: "exit", code, signal}
// events:   {type: "update", params} (session/update, parsed by the SDK), {type: "fs", method, params},
//           {type: "permission", key, params}, {type: "answered", key, response}, {type: "ready"}
import { spawn } from "node:child_process";
import { createWriteStream } from "node:fs";
import { mkdir, readFile, writeFile } from "node:fs/promises";
import { dirname } from "node:path";
import { createInterface } from "node:readline";
import { Readable, Writable } from "node:stream";

const acp = await import(process.env.ACP_SDK);
const argv = JSON.parse(process.env.ACP_AGENT);
const child = spawn(argv[0], argv.slice(1), { cwd: process.env.ACP_CWD, stdio: ["pipe", "pipe", "inherit"] });
let exited = null;
const exitedPromise = new Promise((resolve) => child.on("exit", (code, signal) => { exited = { code, signal }; resolve(exited); }));

function emit(event) {
  process.stdout.write(JSON.stringify(event) + "\n");
}

// Every byte the agent writes goes to the SDK and, untouched, to the wire log.
const [toSdk, toLog] = Readable.toWeb(child.stdout).tee();
const wire = createWriteStream(process.env.ACP_WIRE);
(async () => {
  for await (const chunk of toLog) wire.write(chunk);
})();

let answers = [];
let otherwise = "allow";
let nextKey = 0;
const waiting = new Map();

function permissionResponse(answer, options) {
  if (answer === "cancelled") return { outcome: { outcome: "cancelled" } };
  // "Always allow" (and a consent's "Allow always for this workspace") share their kind with
  // "Allow for session": chosen by option id.
  if (answer === "allowAlways") return { outcome: { outcome: "selected", optionId: "allowAlways" } };
  const kind = { allow: "allow_once", allowSession: "allow_always", deny: "reject_once" }[answer];
  const option = options.find((o) => o.kind === kind);
  return { outcome: { outcome: "selected", optionId: option.optionId } };
}

const app = acp.client({ name: "agent-lsp-tests" })
  .onNotification(acp.methods.client.session.update, ({ params }) => emit({ type: "update", params }))
  .onRequest(acp.methods.client.session.requestPermission, async ({ params }) => {
    const key = nextKey++;
    emit({ type: "permission", key, params });
    const answer = answers.length ? answers.shift() : otherwise;
    let response;
    if (answer === "never") {
      response = await new Promise(() => {});
    } else if (answer === "ask") {
      response = await new Promise((resolve) => waiting.set(key, resolve));
    } else {
      response = permissionResponse(answer, params.options);
    }
    emit({ type: "answered", key, response });
    return response;
  })
  .onRequest(acp.methods.client.fs.readTextFile, async ({ params }) => {
    emit({ type: "fs", method: "fs/read_text_file", params });
    const text = await readFile(params.path, "utf8");
    if (params.line == null && params.limit == null) return { content: text };
    const lines = text.split("\n");
    const start = Math.max(0, (params.line ?? 1) - 1);
    return { content: lines.slice(start, params.limit == null ? undefined : start + params.limit).join("\n") };
  })
  .onRequest(acp.methods.client.fs.writeTextFile, async ({ params }) => {
    emit({ type: "fs", method: "fs/write_text_file", params });
    await mkdir(dirname(params.path), { recursive: true });
    await writeFile(params.path, params.content, "utf8");
    return {};
  });

const stream = acp.ndJsonStream(Writable.toWeb(child.stdin), toSdk);
await app.connectWith(stream, async (ctx) => {
  emit({ type: "ready" });
  const lines = createInterface({ input: process.stdin });
  for await (const line of lines) {
    if (!line.trim()) continue;
    const command = JSON.parse(line);
    if (command.op === "request") {
      ctx.request(command.method, command.params).then(
        (result) => emit({ type: "response", id: command.id, result: result ?? null }),
        (error) => emit({ type: "error", id: command.id, error: { code: error.code, message: error.message, data: error.data ?? null } }),
      );
    } else if (command.op === "notify") {
      await ctx.notify(command.method, command.params);
    } else if (command.op === "permissions") {
      answers = [...(command.answers ?? [])];
      otherwise = command.otherwise ?? "allow";
    } else if (command.op === "answer") {
      const resolve = waiting.get(command.key);
      waiting.delete(command.key);
      if (resolve) resolve(command.response);
    } else if (command.op === "close") {
      break;
    }
  }
}).catch((error) => emit({ type: "fatal", message: String(error?.stack ?? error) }));
// The connection is closed: the agent's stdin ends, as when an editor quits.
try { child.stdin.end(); } catch { /* already closed with the connection */ }
const done = await Promise.race([exitedPromise, new Promise((r) => setTimeout(() => r(null), 10000))]);
if (done === null) child.kill("SIGKILL");
emit({ type: "exit", ...(exited ?? { code: null, signal: "SIGKILL (did not exit within 10 s)" }) });
wire.end();
process.exit(0);
