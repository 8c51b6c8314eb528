#!/usr/bin/env node
// Compile contracts/src/TestUSDC.sol with the project-local solc-js and write the
// deterministic artifact contracts/out/TestUSDC.json (sorted keys, trailing newline),
// so a rebuild from the same source is byte-identical to the committed file.
//
// Usage: node contracts/build.mjs [--out DIR]

import { createHash } from "node:crypto";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const CONTRACT = "TestUSDC";
const contractsDir = dirname(fileURLToPath(import.meta.url));
const repoRoot = resolve(contractsDir, "..");
const sourcePath = join(contractsDir, "src", `${CONTRACT}.sol`);
// The source unit name is baked into the metadata hash: keep it fixed and path-independent.
const sourceUnit = `src/${CONTRACT}.sol`;

// Compiler settings are part of the artifact's identity; change them only on purpose.
const SETTINGS = {
  evmVersion: "cancun",
  metadata: { bytecodeHash: "ipfs" },
  optimizer: { enabled: true, runs: 200 },
};

function parseArgs(argv) {
  let outDir = join(contractsDir, "out");
  for (let i = 0; i < argv.length; i += 1) {
    if (argv[i] === "--out") {
      if (i + 1 >= argv.length) fail("--out needs a directory argument, e.g. --out /tmp/build");
      outDir = resolve(argv[i + 1]);
      i += 1;
    } else {
      fail(`unknown argument ${JSON.stringify(argv[i])}; expected: [--out DIR]`);
    }
  }
  return { outDir };
}

function fail(message) {
  process.stderr.write(`build.mjs: ${message}\n`);
  process.exit(2);
}

function loadSolc() {
  const require = createRequire(join(repoRoot, "tools", "package.json"));
  try {
    return require("solc");
  } catch (err) {
    fail(
      `solc-js not found under ${join(repoRoot, "tools", "node_modules")} (${err.message}); ` +
        "run `make test` or `npm install --prefix tools` to install the pinned tools.",
    );
  }
}

// Recursively sort object keys so JSON.stringify output does not depend on solc's key order.
function sortKeys(value) {
  if (Array.isArray(value)) return value.map(sortKeys);
  if (value !== null && typeof value === "object") {
    const sorted = {};
    for (const key of Object.keys(value).sort()) sorted[key] = sortKeys(value[key]);
    return sorted;
  }
  return value;
}

function main() {
  const { outDir } = parseArgs(process.argv.slice(2));
  const solc = loadSolc();
  const source = readFileSync(sourcePath);

  const input = {
    language: "Solidity",
    sources: { [sourceUnit]: { content: source.toString("utf8") } },
    settings: {
      ...SETTINGS,
      outputSelection: { "*": { "*": ["abi", "evm.bytecode.object", "evm.deployedBytecode.object"] } },
    },
  };
  const output = JSON.parse(solc.compile(JSON.stringify(input)));

  const diagnostics = output.errors ?? [];
  for (const d of diagnostics) process.stderr.write(`${d.formattedMessage ?? d.message}\n`);
  if (diagnostics.some((d) => d.severity === "error")) fail("compilation failed (see above)");

  const compiled = output.contracts?.[sourceUnit]?.[CONTRACT];
  if (!compiled) fail(`solc produced no contract ${CONTRACT} in ${sourceUnit}`);

  const artifact = sortKeys({
    contractName: CONTRACT,
    abi: compiled.abi,
    bytecode: `0x${compiled.evm.bytecode.object}`,
    deployedBytecode: `0x${compiled.evm.deployedBytecode.object}`,
    compiler: { name: "solc-js", version: solc.version() },
    settings: SETTINGS,
    sourceHash: `sha256:${createHash("sha256").update(source).digest("hex")}`,
  });

  mkdirSync(outDir, { recursive: true });
  const outPath = join(outDir, `${CONTRACT}.json`);
  writeFileSync(outPath, `${JSON.stringify(artifact, null, 2)}\n`);
  process.stdout.write(`wrote ${outPath}\n`);
}

main();
