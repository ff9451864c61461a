// The WebSocket event stream (docs/streaming.md). The browser authenticates with the session
// cookie. Job and chain subscriptions resume after the last seq seen of each run, so a
// reconnect replays what was missed without duplicates: a job with after_seq in the query,
// a chain with a subscribe message carrying after_seqs for every run seen so far.

/**
 * openStream connects and keeps reconnecting until close() is called.
 * @param {{job_id?: string, chain_id?: string, scope?: string}} sub
 * @param {(env: object) => void} onEvent every event envelope
 * @param {(state: string, detail?: string) => void} onState connecting | live | disconnected | error
 */
export function openStream(sub, onEvent, onState) {
  let ws = null;
  let closed = false;
  let retry = 0;
  let timer = null;
  const last = new Map(); // run id -> last seq handled (job and chain subscriptions)
  const resumes = Boolean(sub.job_id || sub.chain_id);

  const connect = () => {
    const q = new URLSearchParams();
    if (sub.job_id) {
      q.set('job_id', sub.job_id);
      q.set('after_seq', String(last.get(sub.job_id) || 0));
    }
    if (sub.scope) q.set('scope', sub.scope);
    const proto = location.protocol === 'https:' ? 'wss:' : 'ws:';
    onState('connecting');
    ws = new WebSocket(`${proto}//${location.host}/api/v1/stream?${q}`);
    if (sub.chain_id) {
      ws.onopen = () => ws.send(JSON.stringify({ type: 'subscribe', chain_id: sub.chain_id, after_seqs: Object.fromEntries(last) }));
    }
    ws.onmessage = (m) => {
      let env;
      try { env = JSON.parse(m.data); } catch { return; }
      if (env.type === 'stream:subscribed') { retry = 0; onState('live'); return; }
      if (env.type === 'stream:error') { onState('error', `${env.code}: ${env.message}`); return; }
      if (env.type?.startsWith('stream:')) return;
      if (resumes && env.job_id && env.seq) {
        if (env.seq <= (last.get(env.job_id) || 0)) return;
        last.set(env.job_id, env.seq);
      }
      onEvent(env);
    };
    ws.onclose = (e) => {
      if (closed) return;
      const why = e.code === 4008 ? 'dropped as a slow consumer' : e.reason || `connection closed (${e.code})`;
      onState('disconnected', why);
      const delay = Math.min(10000, 500 * 2 ** retry++);
      timer = setTimeout(connect, delay);
    };
  };
  connect();
  return {
    close() {
      closed = true;
      clearTimeout(timer);
      if (ws) ws.close(1000, 'bye');
    },
    get lastSeq() { return last.get(sub.job_id) || 0; },
  };
}
