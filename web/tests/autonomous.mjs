// Browser tests of the tier 4 (autonomous) view, run by tests/run.mjs with its helpers.
// Each run is driven by a sim-llm script (docs/sim-llm.md, "Scripted answers") that the test
// posts under a name of its own to SWITCHYARD_UI_SIM_URL and names with a [sim-script:NAME]
// marker in the goal, which every call of the run quotes; the skills are saved through the
// API. The agent labels its calls [call:plan|step|reflection|evaluate].

import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const rule = (name, call, match, ...answers) => ({ name, match: { call, ...match }, answers, exhausted: 'error' });
const json = (v) => ({ json: v });
const verdict = (v, reasoning) => json({ verdict: v, reasoning, summary: reasoning });
const planOf = (...steps) => json({ steps: steps.map(([id, type, ...tools], i) => ({
  step_id: id, description: `do ${id}`, execution_type: type, tools, success_criteria: [`${id} is done`],
  depends_on: i ? [steps[i - 1][0]] : [],
})) });
const toolStep = (name, ids, tool, args) => ({ name, match: { call: 'step', last_role: 'user', regex: `Your step \\((${ids})\\)` },
  answers: [{ tool_calls: [{ name: tool, arguments: args }] }], exhausted: 'repeat' });

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const TERMINAL = ['completed', 'completed_max_iterations', 'completed_budget_exhausted', 'failed', 'timed_out', 'cancelled', 'rejected'];

/** autonomousTests registers the tier 4 browser tests; h holds run.mjs's helpers. */
export async function autonomousTests(h) {
  const { test, page, base, call, dispatch, waitRun, shot, assert, sleep, Skip } = h; // and adminKey, requireSkill
  const simURL = process.env.SWITCHYARD_UI_SIM_URL;

  async function script(name, rules, unmatched = 'error') {
    if (!simURL) throw new Skip('SWITCHYARD_UI_SIM_URL is not set: no sim-llm to script');
    const res = await fetch(simURL.replace(/\/$/, '') + '/sim/scripts', {
      method: 'POST', headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ name, unmatched, rules }),
    });
    assert(res.ok, `install sim script ${name}: ${res.status} ${await res.text()}`);
  }

  async function agentSkill(jobType, tools, autonomous) {
    const r = await call(h.adminKey, 'PUT', '/skills/' + jobType, {
      job_type: jobType, enabled: true, execution_type: 'autonomous', routing_hint: 'fast', tools,
      max_iterations: 3, max_tokens: 256, system_prompt: 'You are a careful agent.', autonomous,
    });
    if (r.status === 400 && JSON.stringify(r.body).includes('execution_type')) throw new Skip('no autonomous tier: ' + r.body.message);
    assert(r.status === 200 || r.status === 201, `PUT skill ${jobType}: ${r.status} ${JSON.stringify(r.body)}`);
  }

  const status = () => page.locator('.facts [data-status]').getAttribute('data-status').catch(() => null);
  const uniq = () => Math.random().toString(16).slice(2, 10);

  await test('an autonomous run with a replan: plans, verdict icons, the plan diff and the evaluation, live', async () => {
    const name = 'ui-replan-' + uniq();
    await script(name, [
      rule('plan', 'plan', {}, planOf(['s1', 'tool_using', 'demo_weather'], ['s2', 'llm_only']),
        planOf(['t1', 'tool_using', 'demo_weather'], ['t2', 'llm_only'])),
      toolStep('step-tool', 's1|t1', 'demo_weather', { city: 'Paris' }),
      rule('step-after-tool', 'step', { last_role: 'tool' }, { content: 'It is mild in Paris.' }, { content: 'It is mild in Paris.' }),
      rule('step-text', 'step', { last_role: 'user', regex: 'Your step \\(t2\\)' }, { content: 'Pack a light jacket.' }),
      rule('reflection', 'reflection', {}, verdict('replan', 'the plan assumed the wrong city'),
        verdict('pass', 'demo_weather returned the weather'), verdict('pass', 'the advice is written')),
      rule('evaluate', 'evaluate', {}, json({ goal_achieved: true, reasoning: 'the weather is known and the advice given',
        answer: 'Pack a light jacket.' })),
    ]);
    await agentSkill('ui_agent_replan', ['demo_weather'], { max_steps: 5 });
    const d = await dispatch('ui_agent_replan', `What should I wear in Paris today? [sim-script:${name}]`);
    await page.goto(base + '/ui/#/runs/' + d.jobId);
    await page.locator('[data-testid=agentrun]').waitFor();

    // The replan verdict appears while the run still works on its second plan: the tree is live.
    const s1 = page.locator('[data-testid=a-step][data-step=s1]');
    await s1.locator('[data-testid=verdict][data-verdict=replan]').waitFor({ timeout: 60000 });
    const atReplan = await status();
    await shot(page, '30-autonomous-replan-live');
    assert(atReplan === 'running', 'the replan was drawn before the run ended; status then: ' + atReplan);
    assert((await s1.locator('.vicon').textContent()).trim() === '↻', 'replan icon');
    assert((await s1.locator('[data-testid=reasoning]').textContent()).includes('the plan assumed the wrong city'), 'the verdict\'s reasoning');

    await page.locator('.facts [data-status=completed]').waitFor({ timeout: 60000 });
    // Plan 1: s1 ran (replan), s2 was removed by the replan; plan 2 is a new plan whose steps passed.
    const p1 = page.locator('[data-testid=a-plan][data-plan="1"]');
    assert(await p1.locator('[data-step=s1][data-state=done].v-replan').count() === 1, 'plan 1: s1 done, replan');
    assert(await p1.locator('[data-step=s2][data-state=removed]').count() === 1, 'plan 1: s2 removed');
    const p2 = page.locator('[data-testid=a-plan][data-plan="2"]');
    assert((await p2.locator('.a-kind').textContent()).includes('new plan'), 'plan 2 is the replan\'s');
    assert(await p2.locator('[data-state=done].v-pass').count() === 2, 'plan 2: both steps passed');
    // The diff: s2 removed, t1 and t2 added, with the reasoning.
    const diff = page.locator('[data-testid=a-diff][data-kind=replan]');
    assert(await diff.count() === 1, 'one replan diff');
    assert(JSON.stringify(await diff.locator('[data-removed=true]').allTextContents()) === JSON.stringify(['− s2']), 'removed s2');
    assert(JSON.stringify(await diff.locator('[data-added=true]').allTextContents()) === JSON.stringify(['+ t1', '+ t2']), 'added t1, t2');
    assert((await diff.textContent()).includes('the plan assumed the wrong city'), 'the replan\'s reasoning');
    // Every step in the order it ran, with its verdict icon; the items in the order they happened.
    const order = await page.locator('[data-testid=agentrun] .a-timeline > .a-item').evaluateAll((els) =>
      els.map((e) => e.dataset.testid + (e.dataset.step ? ':' + e.dataset.step : '') + (e.dataset.verdict ? ':' + e.dataset.verdict : '')));
    assert(JSON.stringify(order) === JSON.stringify(['a-plan', 'a-step:s1:replan', 'a-diff', 'a-plan', 'a-step:t1:pass', 'a-step:t2:pass', 'a-eval']),
      'timeline order: ' + order);
    for (const id of ['t1', 't2']) {
      assert((await page.locator(`[data-testid=a-step][data-step=${id}] .vicon`).textContent()).trim() === '✓', id + ' pass icon');
    }
    // Each step is a subtree with its own LLM and tool calls, billed.
    assert(await s1.locator('[data-span-type=tool_call]').count() === 1, 's1 has its tool call');
    // s1: two ReAct turns and its reflection's call, each billed; t2: one call and its reflection's.
    assert(await s1.locator('[data-span-type=llm_call] [data-testid=billing]').count() === 3, 's1 has its three billed LLM calls');
    assert(await s1.locator('[data-span-type=reflection]').count() === 1, 's1 has its reflection');
    assert(await page.locator('[data-testid=a-step][data-step=t2] [data-span-type=llm_call]').count() === 2, 't2 has its LLM calls');
    // The plans' and the evaluation's own LLM calls are under them.
    assert(await page.locator('[data-testid=a-plan] [data-span-type=llm_call]').count() === 2, 'each plan has its LLM call');
    assert(await page.locator('[data-testid=a-eval] [data-span-type=llm_call]').count() === 1, 'the evaluation has its LLM call');
    const ev = page.locator('[data-testid=a-eval]');
    assert(await ev.getAttribute('data-achieved') === 'true', 'goal achieved');
    assert((await ev.textContent()).includes('the weather is known and the advice given'), 'the evaluation\'s reasoning');
    await s1.locator('.a-spans summary').click();
    await shot(page, '31-autonomous-replan-done');
  });

  await test('an autonomous run paused for approval is approved from its tree and completes live', async () => {
    const name = 'ui-gate-' + uniq();
    await script(name, [
      rule('plan', 'plan', {}, planOf(['s1', 'tool_using', 'create_ticket'], ['s2', 'llm_only'])),
      toolStep('step-ticket', 's1', 'create_ticket', { title: 'Printer on fire', priority: 'high' }),
      rule('step-after-tool', 'step', { last_role: 'tool' }, { content: 'Filed the ticket.' }),
      rule('step-text', 'step', { last_role: 'user', regex: 'Your step \\(s2\\)' }, { content: 'Reported.' }),
      rule('reflection', 'reflection', {}, verdict('pass', 'create_ticket returned a ticket id'), verdict('pass', 'reported')),
      rule('evaluate', 'evaluate', {}, json({ goal_achieved: true, reasoning: 'the ticket is filed', answer: 'Ticket filed.' })),
    ]);
    await agentSkill('ui_agent_gate', ['create_ticket'], { require_approval_for: ['create_ticket'], approval_timeout: '2h' });
    const d = await dispatch('ui_agent_gate', `File a ticket about the printer. [sim-script:${name}]`);
    await page.goto(base + '/ui/#/runs/' + d.jobId);

    // The approval node sits in the step that waits, with the proposed call and the deadline.
    const s1 = page.locator('[data-testid=a-step][data-step=s1]');
    const node = s1.locator('[data-testid=approval]');
    await node.waitFor({ timeout: 60000 });
    const api = (await call(h.adminKey, 'GET', '/dispatch/' + d.jobId)).body;
    assert(api.status === 'pending_review' && api.approvalDeadline, 'the API has the run paused with a deadline: ' + JSON.stringify(api).slice(0, 300));
    assert((await page.locator('.facts [data-status]').getAttribute('data-status')) === 'pending_review', 'the page says pending_review');
    assert(await node.locator('[data-testid=proposed][data-tool=create_ticket]').count() === 1, 'the proposed tool');
    const argsText = await node.locator('[data-testid=arguments]').textContent();
    assert(argsText.includes('Printer on fire') && argsText.includes('high'), 'the proposed arguments: ' + argsText);
    const left = Number(await node.locator('[data-testid=time-left]').getAttribute('data-left'));
    const want = (new Date(api.approvalDeadline) - Date.now()) / 1000;
    assert(left > 7000 && left <= 7200 && Math.abs(left - want) < 5, `time left ~2h as the API's deadline says: ${left} s, want ${want}`);
    assert((await node.locator('[data-testid=time-left]').textContent()).startsWith('1h 5'), 'time left reads as hours and minutes');
    const w0 = await node.locator('[data-testid=waiting]').textContent();
    await sleep(1100);
    const w1 = await node.locator('[data-testid=waiting]').textContent();
    assert(w0 !== w1, `the waiting time is live: ${w0} then ${w1}`);
    assert(await node.evaluate((e) => getComputedStyle(e).animationName) === 'await', 'the node pulses');
    await shot(page, '32-autonomous-pending');

    await node.locator('[data-testid=approve-call]').click();
    await page.locator('[data-testid=note]', { hasText: 'Approved' }).waitFor();
    await page.locator('.facts [data-status=completed]').waitFor({ timeout: 60000 });
    assert(await page.locator('[data-testid=approval]').count() === 0, 'no approval node once approved');
    // The tree went on: the approved call was made inside s1, which passed; s2 ran.
    await s1.locator('[data-testid=verdict][data-verdict=pass]').waitFor();
    assert(await s1.locator('[data-testid=was-paused][data-decision=approved]').count() === 1, 's1 says it waited and was approved');
    assert(await s1.locator('[data-span-type=tool_call]').count() === 1, 'the approved create_ticket call in s1\'s subtree');
    await page.locator('[data-testid=a-step][data-step=s2] [data-verdict=pass]').waitFor();
    assert(await page.locator('[data-testid=a-eval][data-achieved=true]').count() === 1, 'goal achieved');
    const done = await waitRun(d.jobId, (r) => r.status === 'completed', 'completed', 5000);
    assert(done.output?.content === 'Ticket filed.', 'the run\'s answer: ' + JSON.stringify(done.output));
    await s1.locator('.a-spans summary').click();
    await shot(page, '33-autonomous-approved');
  });

  await test('an autonomous run paused for approval is rejected from its tree with a reason, and goes on without the call', async () => {
    const name = 'ui-reject-' + uniq();
    await script(name, [
      rule('plan', 'plan', {}, planOf(['s1', 'tool_using', 'create_ticket'])),
      toolStep('step-ticket', 's1', 'create_ticket', { title: 'Printer on fire', priority: 'high' }),
      rule('step-rejected', 'step', { last_role: 'tool', in: 'last', regex: "reviewer's reason: not on a Friday" },
        { content: 'Not filed: not on a Friday.' }),
      rule('reflection', 'reflection', {}, verdict('pass', 'the reviewer refused; reported instead')),
      rule('evaluate', 'evaluate', {}, json({ goal_achieved: false, reasoning: 'the reviewer refused the ticket', answer: 'No ticket filed.' })),
    ]);
    await agentSkill('ui_agent_gate', ['create_ticket'], { require_approval_for: ['create_ticket'], approval_timeout: '2h' });
    const d = await dispatch('ui_agent_gate', `File a ticket about the printer. [sim-script:${name}]`);
    await page.goto(base + '/ui/#/runs/' + d.jobId);
    const node = page.locator('[data-testid=a-step][data-step=s1] [data-testid=approval]');
    await node.waitFor({ timeout: 60000 });
    await node.locator('[data-testid=reject-call]').click();
    const confirm = node.locator('[data-testid=reject-confirm]');
    assert(await confirm.isDisabled(), 'Reject needs a reason');
    await node.locator('input[name=reason]').fill('not on a Friday');
    await confirm.click();
    await page.locator('[data-testid=note]', { hasText: 'Rejected' }).waitFor();
    await page.locator('.facts [data-status=completed]').waitFor({ timeout: 60000 });
    assert(await page.locator('[data-testid=approval]').count() === 0, 'no approval node once rejected');
    assert(await page.locator('[data-testid=a-eval][data-achieved=false]').count() === 1, 'the goal is not achieved without the ticket');
    const was = page.locator('[data-testid=a-step][data-step=s1] [data-testid=was-paused][data-decision=rejected]');
    assert((await was.textContent()).includes('not on a Friday'), 'the step says it was rejected, and why');
    const r = (await call(h.adminKey, 'GET', '/dispatch/' + d.jobId)).body;
    assert(r.output?.content === 'No ticket filed.', 'the agent went on without the call: ' + JSON.stringify(r.output));
    await shot(page, '34-autonomous-rejected');
  });

  // A pattern's agents side by side, for the catalogue's pattern demos once they exist (they
  // are skipped until then): every `agent` span is a column in agent order with its role,
  // and the judge's `chosen` agent is the one marked chosen (span contract: docs/executor.md).
  for (const demo of ['demo_compete', 'demo_critic']) {
    await test(`a ${demo} run draws its agents side by side with the judge's choice`, async () => {
      await h.requireSkill(demo);
      const file = path.join(repo, 'scripts', 'sim', demo + '.json');
      let body;
      try { body = JSON.parse(await readFile(file, 'utf8')); } catch { throw new Skip(`no sim-llm script ${file}`); }
      await script(body.name, body.rules, body.unmatched || 'hash');
      const d = await dispatch(demo, `Which is the better name for a weather bot, Nimbus or Cirrus? [sim-script:${body.name}]`);
      await page.goto(base + '/ui/#/runs/' + d.jobId);
      // A demo may hold a call for a reviewer: approve it (through the API) until the run ends.
      let end;
      for (let i = 0; i < 5; i++) {
        end = await waitRun(d.jobId, (r) => TERMINAL.includes(r.status) || r.status === 'pending_review', 'an end', 90000);
        if (end.status !== 'pending_review') break;
        await call(h.adminKey, 'POST', `/dispatch/${d.jobId}/approve`, { reason: 'browser test' });
        await waitRun(d.jobId, (r) => r.status !== 'pending_review', 'resumed', 30000);
      }
      const spans = (await call(h.adminKey, 'GET', `/dispatch/${d.jobId}/spans`)).body.spans || [];
      const agents = spans.filter((s) => s.type === 'agent').sort((x, y) => x.attributes.agent - y.attributes.agent);
      if (!agents.length) throw new Skip(`${demo} ended ${end.status} without agent spans`);
      const judge = spans.find((s) => s.type === 'judge');
      await page.locator(`.facts [data-status=${end.status}]`).waitFor();
      const cols = page.locator('[data-testid=agents] [data-testid=agent]');
      await page.waitForFunction((n) => document.querySelectorAll('[data-testid=agents] [data-testid=agent]').length === n, agents.length);
      const drawn = await cols.evaluateAll((els) => els.map((e) => [e.dataset.agent, e.dataset.role, e.dataset.chosen]));
      const want = agents.map((a) => [String(a.attributes.agent), a.attributes.role || '',
        String(judge?.attributes?.chosen != null && judge.attributes.chosen === a.attributes.agent)]);
      assert(JSON.stringify(drawn) === JSON.stringify(want), `columns ${JSON.stringify(drawn)}, want ${JSON.stringify(want)}`);
      if (judge) {
        const card = page.locator('[data-testid=a-judge]');
        assert((await card.getAttribute('data-chosen')) === String(judge.attributes.chosen ?? ''), 'the judge card names the chosen agent');
        if (judge.attributes.reasoning) {
          assert((await card.locator('[data-testid=judge-reasoning]').textContent()) === judge.attributes.reasoning, 'the judge\'s reasoning');
        }
      }
      await shot(page, `35-${demo}`);
    });
  }
}
