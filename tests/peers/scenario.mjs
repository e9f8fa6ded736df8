// What the node client peers share: the scenario they run (tests/peers/scenarios.json) and the
// canonical form they print what they got in (keys sorted, `_meta` left out: per-connection stamps).
import { readFileSync } from "node:fs";

export const TIMEOUT_MS = 30000;

export function scenarioSteps(name) {
  const steps = JSON.parse(readFileSync(new URL("scenarios.json", import.meta.url), "utf8"))[name];
  if (!steps) throw new Error(`no scenario ${name}`);
  return steps;
}

export function stable(value) {
  if (Array.isArray(value)) return value.map(stable);
  if (value && typeof value === "object") {
    return Object.fromEntries(
      Object.keys(value)
        .filter((key) => key !== "_meta")
        .sort()
        .map((key) => [key, stable(value[key])]),
    );
  }
  return value;
}
