// Checks what Argus sent to its webhooks against the senders' published
// contracts: a Slack message against @slack/types' Block Kit types (by
// TypeScript's compiler, with excess-property checks), and a GitHub commit
// status request against @octokit/openapi's description of GitHub's REST
// API (its path template and request body schema, by ajv).
//
// node validate_webhooks.js SLACK_BODY.json GITHUB_REQUEST.json
// where GITHUB_REQUEST.json is {method, path, headers, body}. Prints one
// line per check; exits 1 when one fails.
"use strict";
const fs = require("fs");
const path = require("path");
const { execFileSync } = require("child_process");

const [slackFile, githubFile] = process.argv.slice(2);
let failed = false;
const fail = (message) => {
  console.log("FAIL " + message);
  failed = true;
};

// Slack: the message typed as an incoming webhook's body.
const slack = JSON.parse(fs.readFileSync(slackFile, "utf8"));
// Beside node_modules, so that the compiler finds @slack/types there.
fs.mkdirSync(path.join(__dirname, "checks"), { recursive: true });
const dir = fs.mkdtempSync(path.join(__dirname, "checks", "slack-"));
fs.writeFileSync(
  path.join(dir, "message.ts"),
  'import type { KnownBlock } from "@slack/types";\n' +
    "const message: { text: string; blocks: KnownBlock[] } = " + JSON.stringify(slack) + ";\n" +
    "export { message };\n",
);
fs.writeFileSync(
  path.join(dir, "tsconfig.json"),
  JSON.stringify({
    compilerOptions: { strict: true, noEmit: true, module: "nodenext", moduleResolution: "nodenext", skipLibCheck: true, types: [] },
    files: ["message.ts"],
  }),
);
try {
  execFileSync(process.execPath, [path.join(__dirname, "node_modules", "typescript", "bin", "tsc"), "-p", dir], { stdio: "pipe" });
  console.log("ok slack: the message is a Block Kit message (" + slack.blocks.length + " blocks)");
} catch (error) {
  fail("slack: " + (error.stdout || "").toString() + (error.stderr || "").toString());
} finally {
  fs.rmSync(dir, { recursive: true, force: true });
}

// GitHub: the request against POST /repos/{owner}/{repo}/statuses/{sha}.
const github = JSON.parse(fs.readFileSync(githubFile, "utf8"));
const spec = require("@octokit/openapi/generated/api.github.com.deref.json");
const template = "/repos/{owner}/{repo}/statuses/{sha}";
const operation = spec.paths[template] && spec.paths[template][github.method.toLowerCase()];
if (!operation) {
  fail("github: the API has no " + github.method + " " + template);
} else {
  const pattern = new RegExp("^" + template.replace(/\{[^}]+\}/g, "[^/]+") + "$");
  if (!pattern.test(github.path)) fail("github: " + github.path + " is not " + template);
  const schema = operation.requestBody.content["application/json"].schema;
  const Ajv = require("ajv");
  const validate = new Ajv({ strict: false, allErrors: true }).compile(schema);
  if (!validate(github.body)) fail("github: the body: " + JSON.stringify(validate.errors));
  const unknown = Object.keys(github.body).filter((key) => !(key in schema.properties));
  if (unknown.length > 0) fail("github: fields the API does not take: " + unknown.join(", "));
  const accept = (github.headers["accept"] || "").toLowerCase();
  if (accept !== "application/vnd.github+json") fail("github: Accept is " + accept);
  if (!(github.headers["authorization"] || "").startsWith("Bearer ")) fail("github: no bearer token");
  if (!failed) console.log("ok github: " + github.method + " " + github.path + " matches " + operation.operationId);
}
process.exit(failed ? 1 : 0);
