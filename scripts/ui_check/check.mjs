// Drives `taskmine ui` in headless Chromium and compares what the UI published with `taskmine run`.
// Run it through run.sh (which prepares the temp dir, the code snapshot and node_modules).
//
// Why each comparison is what it is: pseudonyms are salted per TASKMINE_HOME, so published bytes differ
// across homes; across homes we compare the funnel and the manifest's family counts, and inside the UI's
// own home a later `taskmine run` must publish nothing new (same version, new_version=False).
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { chromium } from 'playwright-core';

const env = (k, d) => process.env[k] ?? d;
const REPO = env('UI_CHECK_REPO');
const SRC = env('UI_CHECK_SRC', REPO);
const TMP = env('UI_CHECK_TMP');
const OUT = env('UI_CHECK_OUT');
const MODE = env('UI_CHECK_MODE', 'sensor');
const DATASET = 'acme';
const JUNK = 'junk'; // a dataset of unreadable files: its run must fail with a one-line reason, publishing nothing
const CHROMIUM = env('CHROMIUM', '/usr/bin/chromium');
const RUN_TIMEOUT_S = Number(env('UI_CHECK_RUN_TIMEOUT', '360'));
const SENSOR_WAIT_S = Number(env('UI_CHECK_SENSOR_WAIT', '90'));
if (!REPO || !TMP || !OUT) throw new Error('run check.mjs through run.sh (UI_CHECK_REPO/TMP/OUT are unset)');
if (!['sensor', 'button'].includes(MODE)) throw new Error(`UI_CHECK_MODE=${MODE}: use sensor or button`);

const EXPORTS = path.join(TMP, 'exports');
const HOME_UI = path.join(TMP, 'home_ui');
const HOME_CLI = path.join(TMP, 'home_cli');
const FUNNEL_KEYS = ['events', 'work_items', 'candidates', 'tasks', 'validated', 'published'];

const failures = [];
const notes = [];
const shots = [];
const summary = { mode: MODE, tmp: TMP, src: SRC };
const t0 = Date.now();
const log = (msg) => console.log(`[${((Date.now() - t0) / 1000).toFixed(0).padStart(4)}s] ${msg}`);
const expect = (ok, what) => { log(`${ok ? 'ok  ' : 'FAIL'} ${what}`); if (!ok) failures.push(what); return ok; };
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// ---------------------------------------------------------------------------------------------- processes

function taskmineArgs(args) {
  return ['run', '--project', REPO, '--no-sync', 'taskmine', ...args];
}

function taskmineEnv(home) {
  // PYTHONPATH first: the snapshot's packages win over the editable install of the live tree.
  return { ...process.env, PYTHONPATH: SRC, ...(home ? { TASKMINE_HOME: home } : {}) };
}

const children = new Set(); // process groups we started and must not leave behind

function killGroup(pgid, signal) {
  try { process.kill(-pgid, signal); return true; } catch { return false; }
}

/** Run `taskmine ARGS` to completion (or kill it after timeoutS); output goes to TMP/<name>.log and is returned. */
function taskmine(name, args, home, timeoutS) {
  const logPath = path.join(TMP, `${name}.log`);
  log(`$ TASKMINE_HOME=${home ?? '-'} taskmine ${args.join(' ')}   (log: ${logPath})`);
  const started = Date.now();
  return new Promise((resolve) => {
    const p = spawn('uv', taskmineArgs(args),
      { cwd: SRC, env: taskmineEnv(home), stdio: ['ignore', 'pipe', 'pipe'], detached: true });
    children.add(p.pid);
    let out = '';
    let timedOut = false;
    const timer = setTimeout(() => { timedOut = true; killGroup(p.pid, 'SIGKILL'); }, timeoutS * 1000);
    const sink = fs.createWriteStream(logPath);
    for (const s of [p.stdout, p.stderr]) s.on('data', (d) => { out += d; sink.write(d); });
    p.on('close', (code) => {
      clearTimeout(timer);
      children.delete(p.pid);
      sink.end();
      if (timedOut) out += `\n(ui_check: killed after ${timeoutS}s)`;
      resolve({ code: timedOut ? 'timeout' : code, out, seconds: (Date.now() - started) / 1000, timedOut });
    });
  });
}

let ui = null; // the `taskmine ui` process; detached, so it leads its own process group

async function freePort() {
  return new Promise((resolve) => {
    const s = net.createServer();
    s.listen(0, '127.0.0.1', () => { const { port } = s.address(); s.close(() => resolve(port)); });
  });
}

function startUi(port) {
  const logPath = path.join(TMP, 'ui.log');
  const fd = fs.openSync(logPath, 'w');
  log(`$ TASKMINE_HOME=${HOME_UI} taskmine ui --exports ${EXPORTS} --port ${port}   (log: ${logPath})`);
  // detached => setsid: `dagster dev` and its webserver, daemon and code servers share one process group.
  ui = spawn('uv', taskmineArgs(['ui', '--exports', EXPORTS, '--port', String(port)]),
    { cwd: SRC, env: taskmineEnv(HOME_UI), detached: true, stdio: ['ignore', fd, fd] });
  ui.exited = false;
  ui.on('exit', () => { ui.exited = true; });
  summary.ui_pid = ui.pid;
}

async function stopUi() {
  if (!ui || ui.exited) return;
  const pgid = ui.pid;
  const alive = () => { try { process.kill(-pgid, 0); return true; } catch { return false; } };
  log(`stopping taskmine ui (process group ${pgid})`);
  try { process.kill(-pgid, 'SIGINT'); } catch { /* already gone */ }
  for (let i = 0; i < 60 && alive(); i++) await sleep(500);
  if (alive()) {
    notes.push('`taskmine ui` did not stop within 30 s of SIGINT; killed its process group');
    try { process.kill(-pgid, 'SIGKILL'); } catch { /* gone */ }
    for (let i = 0; i < 20 && alive(); i++) await sleep(250);
  }
  expect(!alive(), `every process of taskmine ui (group ${pgid}) has exited`);
}

for (const sig of ['SIGINT', 'SIGTERM']) {
  process.on(sig, async () => { await stopUi(); process.exit(130); });
}
// Whatever happens, never leave `taskmine ui` or a `taskmine run` behind.
process.on('exit', () => {
  if (ui && !ui.exited) killGroup(ui.pid, 'SIGKILL');
  for (const pgid of children) killGroup(pgid, 'SIGKILL');
});
for (const ev of ['uncaughtException', 'unhandledRejection']) {
  process.on(ev, async (e) => { console.error(e); await stopUi(); process.exit(1); });
}

// ---------------------------------------------------------------------------------------------- GraphQL

let BASE = '';

async function gql(query, variables = {}) {
  const r = await fetch(`${BASE}/graphql`, {
    method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ query, variables }),
  });
  const j = await r.json();
  if (j.errors) throw new Error(`GraphQL: ${JSON.stringify(j.errors).slice(0, 400)}`);
  return j.data;
}

const RUN_FIELDS = 'runId status jobName startTime endTime tags { key value }';

async function getRun(runId) {
  const d = await gql(`query($id: ID!) { runOrError(runId: $id) { __typename ... on Run { ${RUN_FIELDS} } } }`,
    { id: runId });
  return d.runOrError.__typename === 'Run' ? d.runOrError : null;
}

async function sensorRuns() {
  const d = await gql(`{ runsOrError(filter: { tags: [{ key: "dagster/sensor_name", value: "new_export_folders" }] })
    { ... on Runs { results { ${RUN_FIELDS} } } } }`);
  return d.runsOrError.results ?? [];
}

async function partitions() {
  const d = await gql('{ assetNodes { partitionKeys } }');
  return [...new Set(d.assetNodes.flatMap((n) => n.partitionKeys ?? []))];
}

async function latestMaterialization(asset) {
  const d = await gql(`query($k: AssetKeyInput!, $p: [String!]) { assetOrError(assetKey: $k) { ... on Asset {
      assetMaterializations(partitions: $p, limit: 1) { runId partition metadataEntries { label __typename
        ... on TextMetadataEntry { text } ... on BoolMetadataEntry { boolValue } ... on IntMetadataEntry { intValue }
        ... on FloatMetadataEntry { floatValue } ... on JsonMetadataEntry { jsonString }
        ... on PathMetadataEntry { path } ... on MarkdownMetadataEntry { mdStr }
        ... on TableMetadataEntry { table { records } } } } } } }`,
  { k: { path: [asset] }, p: [DATASET] });
  const m = d.assetOrError?.assetMaterializations?.[0];
  if (!m) return null;
  const md = {};
  for (const e of m.metadataEntries) {
    // a table (the funnel) becomes {first column: second column}, e.g. {events: 269, ...}
    const table = e.table?.records?.map((r) => Object.values(JSON.parse(r)));
    md[e.label] = e.text ?? e.boolValue ?? e.intValue ?? e.floatValue ?? e.path ?? e.mdStr
      ?? (e.jsonString !== undefined ? JSON.parse(e.jsonString) : undefined)
      ?? (table ? Object.fromEntries(table.map((r) => [r[0], r[1]])) : undefined);
  }
  return { runId: m.runId, metadata: md };
}

async function assetsAndChecks() {
  const d = await gql(`{ assetNodes { assetKey { path } assetChecksOrError { ... on AssetChecks { checks { name
      executionForLatestMaterialization { status runId evaluation { success severity
        metadataEntries { label ... on IntMetadataEntry { intValue } ... on TextMetadataEntry { text }
          ... on FloatMetadataEntry { floatValue } } } } } } } } }`);
  return d.assetNodes.map((n) => ({
    asset: n.assetKey.path.join('/'),
    checks: (n.assetChecksOrError.checks ?? []).map((c) => ({
      name: c.name,
      status: c.executionForLatestMaterialization?.status ?? 'NONE',
      runId: c.executionForLatestMaterialization?.runId,
      success: c.executionForLatestMaterialization?.evaluation?.success,
      metadata: Object.fromEntries((c.executionForLatestMaterialization?.evaluation?.metadataEntries ?? [])
        .map((e) => [e.label, e.intValue ?? e.text ?? e.floatValue])),
    })),
  }));
}

async function assetNames() {
  const d = await gql('{ assetNodes { assetKey { path } } }');
  return d.assetNodes.map((n) => n.assetKey.path.join('/'));
}

async function waitForRun(runId, label) {
  const deadline = Date.now() + RUN_TIMEOUT_S * 1000;
  let last = '';
  for (;;) {
    const run = await getRun(runId);
    if (run && run.status !== last) { log(`${label} ${runId.slice(0, 8)}: ${run.status}`); last = run.status; }
    if (run && ['SUCCESS', 'FAILURE', 'CANCELED'].includes(run.status)) return run;
    if (Date.now() > deadline) { failures.push(`${label} ${runId} still ${last} after ${RUN_TIMEOUT_S}s`); return run; }
    if (ui.exited) throw new Error('taskmine ui exited while a run was in progress (see ui.log)');
    await sleep(5000);
  }
}

/** One line per failed step: what the CLI would have printed, dug out of the run's event log. */
async function stepFailures(runId) {
  const d = await gql(`query($id: ID!) { logsForRun(runId: $id) { ... on EventConnection { events { __typename
      ... on ExecutionStepFailureEvent { stepKey error { message cause { message } } } } } } }`, { id: runId });
  return (d.logsForRun.events ?? []).filter((e) => e.__typename === 'ExecutionStepFailureEvent')
    .map((e) => `${e.stepKey}: ${((e.error.cause ?? e.error).message ?? '').trim().split('\n').pop().slice(0, 400)}`);
}

const seconds = (run) => (run?.endTime && run?.startTime ? +(run.endTime - run.startTime).toFixed(1) : null);

// ---------------------------------------------------------------------------------------------- browser

let page;
const consoleErrors = [];

async function shot(name, opts = {}) {
  const file = path.join(OUT, `${name}.png`);
  await page.screenshot({ path: file, ...opts });
  shots.push(file);
  log(`screenshot ${file}`);
}

/** Go to a UI path. The "Join the Dagster community" modal must never show (nux is off in the instance
 * config); if it does, that is a failure, and it is dismissed so the rest of the check can go on. */
async function go(urlPath, ready) {
  await page.goto(BASE + urlPath);
  if (ready) await ready().waitFor({ timeout: 30000 });
  const skip = page.getByRole('button', { name: 'Skip', exact: true });
  try {
    await skip.waitFor({ state: 'visible', timeout: ready ? 1500 : 5000 });
    expect(false, `no "Join the Dagster community" modal on ${urlPath}`);
    await skip.click();
  } catch { /* no modal */ }
}

async function lineageShot(name) {
  await go('/asset-groups', () => page.getByRole('button', { name: /Materialize all/ }));
  // About one asset group per stage: the graph opens as a row of collapsed group boxes. Expand them.
  try {
    // the asset tree beside the graph takes a third of the width: fold it
    await page.getByPlaceholder(/Jump to/).locator('xpath=following::button[1]').click({ timeout: 3000 });
  } catch { /* layout without the tree */ }
  try {
    await page.locator('[aria-label=settings]').last().click();
    const toggle = page.getByRole('menuitem', { name: /(Expand|Collapse) all groups/ });
    await toggle.waitFor({ timeout: 3000 });
    if (/Expand/.test(await toggle.innerText())) await toggle.click(); // else already expanded in this session
    await page.keyboard.press('Escape');
    await page.getByText('raw_events', { exact: true }).first().waitFor({ timeout: 10000 });
  } catch (e) { notes.push(`could not expand the lineage groups: ${e.message.split('\n')[0]}`); }
  await page.mouse.click(700, 150); // close any menu
  await sleep(1500);
  await shot(name);
}

async function runPageShot(runId, name) {
  await go(`/runs/${runId}`, () => page.getByText(runId.slice(0, 8)).first());
  await page.getByText(/^(Success|Failure|Canceled)$/).first().waitFor({ timeout: 30000 }).catch(() => {});
  await sleep(2000);
  await shot(name);
  return (await page.locator('body').innerText());
}

async function materializeAll() {
  await go('/asset-groups', () => page.getByRole('button', { name: /Materialize all/ }));
  await page.getByRole('button', { name: /Materialize all/ }).click();
  const dlg = page.getByRole('dialog').filter({ hasText: 'Launch runs to materialize' });
  await dlg.waitFor();
  const title = (await dlg.innerText()).split('\n')[0];
  const n = (await assetNames()).length;
  expect(title.includes(`materialize ${n} assets`), `Materialize-all dialog covers all ${n} assets ("${title}")`);
  if (!(await partitions()).includes(DATASET)) {
    log(`partition ${DATASET} is not known yet: adding it from the dialog ("Add a partition")`);
    await dlg.getByText('Add a partition').click();
    const add = page.getByRole('dialog').filter({ hasText: 'Add a partition for datasets' });
    await add.getByRole('textbox').fill(DATASET);
    await add.getByRole('button', { name: 'Save' }).click();
    await add.waitFor({ state: 'hidden' });
    expect((await partitions()).includes(DATASET), `partition ${DATASET} was added from the UI`);
  }
  if (!/\b1 partition\b/.test(await dlg.innerText())) { // "Add a partition" leaves the selection empty
    await dlg.getByText('Select a partition or create one').click();
    await page.getByRole('menuitem').filter({ has: page.getByText(DATASET, { exact: true }) }).first().click();
    await page.keyboard.press('Escape');
  }
  if (MODE === 'button' && !fs.existsSync(path.join(EXPORTS, DATASET))) await writeSample();
  await sleep(500);
  const launch = dlg.getByRole('button', { name: /^Launch 1 run$/ });
  await shot('03_launch_dialog');
  if (!expect(await launch.isVisible(), 'dialog offers "Launch 1 run" for the one selected partition')) {
    throw new Error('the Materialize-all dialog has no "Launch 1 run" button (see 03_launch_dialog.png)');
  }
  const launched = page.waitForResponse((r) => r.url().includes('/graphql')
    && /"operationName":\s*"LaunchPipelineExecution"/.test(r.request().postData() ?? ''), { timeout: 60000 });
  launched.catch(() => {}); // awaited below; never an unhandled rejection if the click throws
  await launch.click();
  const body = await (await launched).json();
  const res = body.data?.launchPipelineExecution;
  if (res?.__typename !== 'LaunchRunSuccess') throw new Error(`launch failed: ${JSON.stringify(body).slice(0, 500)}`);
  log(`launched run ${res.run.id} (${res.run.pipelineName}) from the Materialize-all dialog`);
  return res.run.id;
}

async function visitAssets(uiRunId, withChecks) {
  const names = await assetNames();
  fs.mkdirSync(path.join(OUT, 'assets'), { recursive: true });
  for (const name of names) {
    const m = await latestMaterialization(name);
    expect(m?.runId === uiRunId, `${name}[${DATASET}] was materialized by the UI run`);
    await go(`/assets/${name}?partition=${DATASET}`, () => page.getByText('Latest materialization').first());
    await sleep(1500);
    await page.screenshot({ path: path.join(OUT, 'assets', `${name}.png`), fullPage: true });
    const text = await page.locator('main, body').first().innerText();
    for (const bad of [/Traceback/, /\bError:/, /exception/i]) {
      if (bad.test(text)) notes.push(`asset page ${name} shows ${bad}`);
    }
    summary.asset_metadata ??= {};
    summary.asset_metadata[name] = Object.fromEntries(Object.entries(m?.metadata ?? {})
      .filter(([k]) => !['preview', 'funnel', 'path', 'dataset_dir'].includes(k)));
  }
  await go(`/assets/published_dataset?partition=${DATASET}`, () => page.getByText('Latest materialization').first());
  await sleep(1500);
  await shot('05_published_dataset');
  const pubText = await page.locator('body').innerText();
  expect(/kept from previous/.test(pubText) || /funnel/.test(pubText), 'published_dataset shows the funnel table');
  // Every asset that has checks: its Checks tab must show each of them Passed (the checks are spread over
  // raw_events, anonymized_events, validations and published_dataset).
  for (const { asset, checks } of withChecks) {
    await go(`/assets/${asset}?view=checks&partition=${DATASET}`, () => page.getByText('Evaluation result').first());
    await sleep(1500);
    const text = await page.locator('body').innerText();
    expect(checks.every((c) => text.includes(c.name)) && /Passed/.test(text) && !/Failed/.test(text),
      `${asset} checks tab shows ${checks.map((c) => c.name).join(', ')} and Passed, no Failed`);
    if (asset === 'published_dataset') await shot('06_published_dataset_checks');
    else await page.screenshot({ path: path.join(OUT, 'assets', `${asset}_checks.png`) });
  }
}

// ---------------------------------------------------------------------------------------------- steps

async function writeSample() {
  const r = await taskmine('sample', ['sample', '--out', EXPORTS, '--dataset', DATASET], null, 300);
  if (r.code !== 0) throw new Error(`taskmine sample failed (exit ${r.code}): ${r.out.slice(-500)}`);
}

function writeJunk() {
  const dir = path.join(EXPORTS, JUNK, 'jira');
  fs.mkdirSync(dir, { recursive: true });
  for (const i of [1, 2, 3]) fs.writeFileSync(path.join(dir, `X-${i}.json`), '{"key": "X-1", "fields": {"created": ');
}

/** The junk dataset's run (started by the sensor) fails, says why in one line, and publishes nothing. */
async function junkRun() {
  const deadline = Date.now() + SENSOR_WAIT_S * 1000;
  let run = null;
  while (!run && Date.now() < deadline) {
    run = (await sensorRuns()).find((r) => r.tags.some((t) => t.key === 'dagster/partition' && t.value === JUNK));
    if (!run) await sleep(3000);
  }
  if (!expect(!!run, `sensor launched a run for the junk dataset ${JUNK}`)) return;
  const done = await waitForRun(run.runId, 'junk run');
  const reason = done.tags.find((t) => t.key === 'taskmine/error')?.value ?? '';
  summary.junk_run = { id: done.runId, status: done.status, reason };
  expect(done.status === 'FAILURE', `the junk run failed (${done.status})`);
  expect(/could not be read, over max_quarantine_rate/.test(reason), `its taskmine/error tag says why: "${reason}"`);
  const text = await runPageShot(done.runId, '02c_junk_run_failed');
  expect(text.includes('could not be read'), 'the run page shows the one-line reason');
  expect(!fs.existsSync(path.join(HOME_UI, 'published', JUNK, 'LATEST')), 'nothing of the junk dataset was published');
}

async function scheduleIsRunning() {
  const d = await gql(`{ schedulesOrError(repositorySelector: { repositoryName: "__repository__",
      repositoryLocationName: "taskmine" }) { __typename ... on Schedules { results { name scheduleState { status } } } } }`)
    .catch((e) => ({ error: e.message }));
  const found = d.schedulesOrError?.results?.find((r) => r.name === 'daily_changed_datasets');
  expect(found?.scheduleState?.status === 'RUNNING',
    `schedule daily_changed_datasets is on by default (${found?.scheduleState?.status ?? JSON.stringify(d).slice(0, 200)})`);
}

function parseCli(out) {
  const funnel = {};
  for (const m of out.matchAll(/^ {2}(\w+)\s+(\d+)\s*$/gm)) funnel[m[1]] = Number(m[2]);
  const pub = out.match(/published_dataset\s+version=(\S+?), tasks=(\d+), new_version=(True|False)/);
  return { funnel, version: pub?.[1], tasks: pub ? Number(pub[2]) : null, new_version: pub ? pub[3] === 'True' : null };
}

function manifest(home) {
  const root = path.join(home, 'published', DATASET);
  if (!fs.existsSync(path.join(root, 'LATEST'))) return {};
  const latest = fs.readFileSync(path.join(root, 'LATEST'), 'utf8').trim();
  return JSON.parse(fs.readFileSync(path.join(root, latest, 'manifest.json'), 'utf8'));
}

async function uiPhase() {
  fs.mkdirSync(EXPORTS, { recursive: true });
  if (MODE === 'sensor') { await writeSample(); writeJunk(); }
  const port = await freePort();
  BASE = `http://127.0.0.1:${port}`;
  startUi(port);
  const up0 = Date.now();
  for (;;) {
    if (ui.exited) throw new Error(`taskmine ui exited before serving (see ${TMP}/ui.log)`);
    try { if ((await fetch(BASE)).status === 200) break; } catch { /* not yet */ }
    if (Date.now() - up0 > 180000) throw new Error('taskmine ui did not answer HTTP 200 within 180 s');
    await sleep(1000);
  }
  summary.ui_startup_s = (Date.now() - up0) / 1000;
  log(`Dagster UI answers HTTP 200 at ${BASE} after ${summary.ui_startup_s}s`);

  const browser = await chromium.launch({
    executablePath: CHROMIUM, headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
      '--disable-component-update', '--disable-sync'],
  });
  try {
    page = await browser.newPage({ viewport: { width: 1680, height: 1000 } });
    page.on('console', (m) => { if (m.type() === 'error') consoleErrors.push(m.text().slice(0, 300)); });
    page.on('pageerror', (e) => consoleErrors.push(`pageerror: ${e.message.slice(0, 300)}`));
    await lineageShot('01_lineage');
    await scheduleIsRunning();

    // The sensor (default RUNNING) turns the new folder into a partition and launches a run at once.
    let sensorRun = null;
    if (MODE === 'sensor') {
      const deadline = Date.now() + SENSOR_WAIT_S * 1000;
      while (!sensorRun && Date.now() < deadline) { sensorRun = (await sensorRuns())[0] ?? null; if (!sensorRun) await sleep(3000); }
      if (expect(!!sensorRun, `sensor new_export_folders launched a run for ${DATASET} within ${SENSOR_WAIT_S}s`)) {
        expect(sensorRun.tags.some((t) => t.key === 'dagster/partition' && t.value === DATASET),
          `the sensor run is for partition ${DATASET}`);
        await go('/automation', () => page.getByRole('link', { name: 'new_export_folders' }).first());
        await page.getByRole('link', { name: 'new_export_folders' }).first().click();
        await page.getByText('1 run requested').first().waitFor({ timeout: 30000 }).catch(() => {});
        await sleep(1500);
        await shot('02_sensor');
        // Never two runs on one warehouse at once: wait for the sensor's run before clicking.
        const done = await waitForRun(sensorRun.runId, 'sensor run');
        summary.sensor_run = { id: done.runId, status: done.status, seconds: seconds(done), job: done.jobName };
        if (!expect(done.status === 'SUCCESS', `sensor run ${done.runId.slice(0, 8)} succeeded (${seconds(done)}s)`)) {
          summary.sensor_run.step_failures = await stepFailures(done.runId);
          for (const f of summary.sensor_run.step_failures) log(`  step failed: ${f}`);
        }
        await runPageShot(done.runId, '02b_sensor_run');
        const m = await latestMaterialization('published_dataset');
        summary.sensor_run.version = m?.metadata.version;
      }
      await junkRun();
    }

    const runId = await materializeAll();
    await go(`/runs/${runId}`, () => page.getByText(runId.slice(0, 8)).first());
    const run = await waitForRun(runId, 'UI run');
    summary.ui_run = { id: run.runId, status: run.status, seconds: seconds(run), job: run.jobName };
    if (!expect(run.status === 'SUCCESS', `UI run ${runId.slice(0, 8)} succeeded (${seconds(run)}s)`)) {
      summary.ui_run.step_failures = await stepFailures(runId);
      for (const f of summary.ui_run.step_failures) log(`  step failed: ${f}`);
    }
    const runText = await runPageShot(runId, '04_ui_run');
    expect(/Success/.test(runText), 'run page shows Success');

    const pub = await latestMaterialization('published_dataset');
    summary.ui_published = pub?.metadata;
    log(`UI published ${pub?.metadata.version} (new_version=${pub?.metadata.new_version}) funnel=${JSON.stringify(pub?.metadata.funnel)}`);
    const valid = await latestMaterialization('validations');
    summary.ui_validations = valid?.metadata;

    const checks = (await assetsAndChecks()).flatMap((a) => a.checks.map((c) => ({ asset: a.asset, ...c })));
    summary.checks = checks;
    expect(checks.some((c) => c.name === 'leak_audit'), `asset checks defined: ${checks.map((c) => c.name).join(', ')}`);
    for (const c of checks) {
      expect(c.status === 'SUCCEEDED' && c.success === true && c.runId === runId,
        `check ${c.asset}:${c.name} passed in the UI run (${c.status}, ${JSON.stringify(c.metadata)})`);
    }
    await visitAssets(runId, (await assetsAndChecks()).filter((a) => a.checks.length));
    await lineageShot('07_lineage_after');
    await go('/assets', () => page.getByText('published_dataset').first());
    await sleep(2500);
    await shot('08_catalog');
    if (summary.sensor_run?.version) {
      expect(summary.sensor_run.version === pub?.metadata.version,
        `the UI run re-published the sensor run's version ${summary.sensor_run.version}`);
    }
  } finally {
    await browser.close();
    await stopUi();
  }
  summary.console_errors = [...new Set(consoleErrors)];
}

async function cliPhase() {
  const uiPub = summary.ui_published ?? {};
  const same = await taskmine('cli_same_home', ['run', '--exports', EXPORTS, '--dataset', DATASET], HOME_UI,
    RUN_TIMEOUT_S);
  const s = parseCli(same.out);
  summary.cli_same_home = { exit: same.code, seconds: same.seconds, ...s };
  expect(same.code === 0, `taskmine run in the UI's home exits 0 (${same.seconds.toFixed(0)}s)`);
  expect(s.new_version === false, `taskmine run in the UI's home reports new_version=False (got ${s.new_version})`);
  expect(s.version && s.version === uiPub.version, `... and the same version as the UI (${s.version} vs ${uiPub.version})`);

  const other = await taskmine('cli_other_home', ['run', '--exports', EXPORTS, '--dataset', DATASET], HOME_CLI,
    RUN_TIMEOUT_S);
  const o = parseCli(other.out);
  summary.cli_other_home = { exit: other.code, seconds: other.seconds, ...o };
  expect(other.code === 0, `taskmine run in a fresh home exits 0 (${other.seconds.toFixed(0)}s)`);

  const uiFunnel = uiPub.funnel ?? {};
  for (const k of FUNNEL_KEYS) {
    expect(uiFunnel[k] !== undefined && uiFunnel[k] === o.funnel[k] && uiFunnel[k] === s.funnel[k],
      `funnel ${k}: UI ${uiFunnel[k]} = CLI fresh home ${o.funnel[k]} = CLI same home ${s.funnel[k]}`);
  }
  const mu = manifest(HOME_UI);
  const mc = manifest(HOME_CLI);
  summary.manifests = { ui: { version: mu.version, families: mu.families, splits: mu.splits, counts: mu.counts },
    cli: { version: mc.version, families: mc.families, splits: mc.splits, counts: mc.counts } };
  expect(mu.families && JSON.stringify(mu.families) === JSON.stringify(mc.families),
    `published families: UI ${JSON.stringify(mu.families)} = CLI ${JSON.stringify(mc.families)}`);
  if (JSON.stringify(mu.splits) !== JSON.stringify(mc.splits)) {
    notes.push(`train/test splits differ across homes: UI ${JSON.stringify(mu.splits)} vs CLI ${JSON.stringify(mc.splits)}`);
  }
  expect(mu.version === uiPub.version, `LATEST in the UI's home is still the UI's version ${uiPub.version}`);
}

async function main() {
  fs.rmSync(OUT, { recursive: true, force: true });
  fs.mkdirSync(OUT, { recursive: true });
  log(`mode=${MODE} tmp=${TMP}`);
  try {
    await uiPhase();
    await cliPhase();
  } catch (e) {
    failures.push(`aborted: ${e.message.split('\n')[0]}`);
    console.error(e);
  } finally {
    await stopUi();
  }
  summary.failures = failures;
  summary.notes = notes;
  summary.screenshots = shots;
  summary.seconds_total = (Date.now() - t0) / 1000;
  fs.writeFileSync(path.join(OUT, 'summary.json'), JSON.stringify(summary, null, 2));

  const f = (o) => FUNNEL_KEYS.map((k) => `${k}=${o?.[k] ?? '?'}`).join(' ');
  console.log('\n==================== ui_check summary ====================');
  console.log(`mode            ${MODE}`);
  if (summary.sensor_run) console.log(`sensor run      ${summary.sensor_run.id} ${summary.sensor_run.status} ${summary.sensor_run.seconds}s`);
  if (summary.junk_run) console.log(`junk run        ${summary.junk_run.id} ${summary.junk_run.status}: ${summary.junk_run.reason}`);
  console.log(`UI run          ${summary.ui_run?.id ?? '-'} ${summary.ui_run?.status ?? '-'} ${summary.ui_run?.seconds ?? '-'}s (validated_now=${summary.ui_validations?.validated_now ?? '?'})`);
  console.log(`CLI same home   ${summary.cli_same_home?.seconds?.toFixed(0) ?? '-'}s version=${summary.cli_same_home?.version} new_version=${summary.cli_same_home?.new_version}`);
  console.log(`CLI fresh home  ${summary.cli_other_home?.seconds?.toFixed(0) ?? '-'}s version=${summary.cli_other_home?.version}`);
  console.log(`funnel UI       ${f(summary.ui_published?.funnel)}`);
  console.log(`funnel CLI      ${f(summary.cli_other_home?.funnel)}`);
  console.log(`UI version      ${summary.ui_published?.version}`);
  for (const c of summary.checks ?? []) console.log(`check           ${c.asset}:${c.name} ${c.status}`);
  for (const n of notes) console.log(`note            ${n}`);
  for (const e of summary.console_errors ?? []) console.log(`console error   ${e}`);
  console.log(`screenshots     ${OUT}/*.png (${shots.length}), per-asset pages in ${OUT}/assets/`);
  console.log(`total           ${summary.seconds_total.toFixed(0)}s`);
  console.log(failures.length ? `RESULT: FAIL (${failures.length})\n  - ${failures.join('\n  - ')}` : 'RESULT: PASS');
  process.exit(failures.length ? 1 : 0);
}

await main();
