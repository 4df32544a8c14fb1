// Smoke test of a client generated from Sluice's /openapi.json
// (openapi-typescript types + openapi-fetch), against a real `sluice serve`
// with the embedded examples. scripts/test-openapi.sh generates gen/sluice.ts
// from the running server, type-checks this file against it (so a call
// below that the description does not allow fails to compile) and runs it.
// Usage: node out/smoke.js http://127.0.0.1:PORT
import createClient from "openapi-fetch";
import type { paths, components } from "./gen/sluice.js";

const base = process.argv[2];
if (!base) {
  throw new Error("usage: node out/smoke.js BASE_URL");
}
const client = createClient<paths>({ baseUrl: base });

let failures = 0;
function check(ok: boolean, what: string): void {
  if (ok) {
    console.log(`ok   ${what}`);
  } else {
    failures++;
    console.log(`FAIL ${what}`);
  }
}

type Model = components["schemas"]["Model"];

async function main(): Promise<void> {
  const ready = await client.GET("/readyz");
  check(ready.response.status === 200 && ready.data?.ready === true, "GET /readyz: ready");

  const list = await client.GET("/v1/models");
  const names = (list.data?.models ?? []).map((m: Model) => m.name);
  check(["churn", "fraud", "iris"].every((n) => names.includes(n)), `GET /v1/models: ${names.join(", ")}`);

  const iris = await client.GET("/v1/models/{name}", { params: { path: { name: "iris" } } });
  const fields = (iris.data?.input?.fields ?? []).map((f) => f.name);
  check(fields.join(",") === "sepalLength,sepalWidth,petalLength,petalWidth", `GET /v1/models/iris: input fields ${fields.join(",")}`);
  const serving = iris.data?.servingVersion;
  check(typeof serving === "number" && serving >= 1, `iris serves version ${serving}`);

  const pred = await client.POST("/v1/models/{name}:predict", {
    params: { path: { name: "iris" }, header: { "X-Request-Id": "openapi-smoke-1" } },
    body: { instances: [{ sepalLength: 5.1, sepalWidth: 3.5, petalLength: 1.4, petalWidth: 0.2 }], deadlineMs: 5000 },
  });
  const setosa = pred.data?.predictions?.[0]?.["setosa"];
  check(pred.response.status === 200 && pred.data?.requestId === "openapi-smoke-1", `predict: 200, request id ${pred.data?.requestId}`);
  // The golden example of examples/iris/model.yaml: setosa 0.9531188.
  check(typeof setosa === "number" && Math.abs(setosa - 0.9531188) < 1e-5, `predict: setosa ${setosa} (golden 0.9531188)`);
  check(pred.data?.modelVersion === `iris@${serving}`, `predict: modelVersion ${pred.data?.modelVersion}`);

  const v = await client.GET("/v1/models/{name}/versions/{n}", { params: { path: { name: "iris", n: serving ?? 1 } } });
  check(v.data?.state === "ready" && (v.data?.servingConfig?.readyReplicas ?? 0) >= 1, `GET version: ${v.data?.id} ${v.data?.state}`);

  const dep = await client.GET("/v1/deployments/{model}", { params: { path: { model: "iris" } } });
  const weights = (dep.data?.targets ?? []).map((t) => `${t.version}:${t.weight}`);
  check(dep.response.status === 200 && weights.length >= 1, `GET deployment: ${weights.join(", ")}`);

  const missing = await client.POST("/v1/models/{name}:predict", {
    params: { path: { name: "nosuchmodel" } },
    body: { instances: [{}] },
  });
  check(missing.response.status === 404 && missing.error?.error.code === "not_found", `predict an unknown model: ${missing.response.status} ${missing.error?.error.code}`);

  const bad = await client.POST("/v1/models/{name}:predict", {
    params: { path: { name: "iris" } },
    body: { instances: [{ sepalLength: "long", sepalWidth: 3.5, petalLength: 1.4, petalWidth: 0.2 }] },
  });
  check(bad.response.status === 400 && bad.error?.error.field === "instances[0].sepalLength", `a bad field: ${bad.response.status} ${bad.error?.error.field}`);

  const md = await client.GET("/v2/models/{model}", { params: { path: { model: "iris" } } });
  check((md.data?.inputs ?? []).length >= 1, `OIP metadata: inputs ${(md.data?.inputs ?? []).map((i) => i.name).join(",")}`);

  const infer = await client.POST("/v2/models/{model}/infer", {
    params: { path: { model: "iris" } },
    body: {
      id: "smoke",
      inputs: [
        { name: "sepalLength", datatype: "FP32", shape: [1], data: [5.1] },
        { name: "sepalWidth", datatype: "FP32", shape: [1], data: [3.5] },
        { name: "petalLength", datatype: "FP32", shape: [1], data: [1.4] },
        { name: "petalWidth", datatype: "FP32", shape: [1], data: [0.2] },
      ],
    },
  });
  // The answer is JSON or, with binary outputs asked for, bytes: this call asked for JSON.
  const idata = infer.data;
  const outputs = typeof idata === "object" && idata !== null ? idata.outputs : [];
  const out = outputs.find((o) => o.name === "setosa");
  const x = out?.data?.[0];
  check(infer.response.status === 200 && typeof x === "number" && Math.abs(x - 0.9531188) < 1e-5, `OIP infer: setosa ${x}`);

  const jobs = await client.GET("/v1/jobs");
  check(jobs.response.status === 200 && Array.isArray(jobs.data?.jobs), `GET /v1/jobs: ${jobs.data?.jobs?.length} jobs`);

  if (failures > 0) {
    console.log(`${failures} check(s) failed`);
    process.exit(1);
  }
  console.log("openapi smoke: every check passed");
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
