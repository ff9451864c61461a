// `npm test`: runs the browser tests through the Go e2e harness (e2e/ui_test.go), which builds
// the binaries, starts Postgres-backed sim-llm, provider-router, executor and dispatcher on
// free ports with their own database and Redis DB, and then runs tests/run.mjs.
// Needs the test profile's Postgres and Redis: under `make test` they are up and
// SWITCHYARD_TEST_* are set; otherwise this starts them with scripts/stack.sh.
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import path from 'node:path';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
let script = 'cd e2e && go test -count=1 -timeout 15m -run "^TestUI$" -v .';
if (!process.env.SWITCHYARD_TEST_DATABASE_URL) {
  script = 'scripts/stack.sh start test >&2 && eval "$(scripts/stack.sh env test)" && ' + script;
}
const res = spawnSync('bash', ['-c', script], {
  cwd: root, stdio: 'inherit', env: { ...process.env, SWITCHYARD_UI_TESTS: '1' },
});
process.exit(res.status ?? 1);
