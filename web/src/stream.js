// The WebSocket event stream (docs/streaming.md). The browser authenticates with the session
// cookie; a job subscription resumes after the last seq it saw, so a reconnect replays what
// was missed without duplicates.

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
  let lastSeq = 0; // of sub.job_id

  const connect = () => {
    const q = new URLSearchParams(sub);
    if (sub.job_id) q.set('after_seq', String(lastSeq));
    const proto = location.protocol === 'https:' ? 'wss:' : 'ws:';
    onState('connecting');
    ws = new WebSocket(`${proto}//${location.host}/api/v1/stream?${q}`);
    ws.onmessage = (m) => {
      let env;
      try { env = JSON.parse(m.data); } catch { return; }
      if (env.type === 'stream:subscribed') { retry = 0; onState('live'); return; }
      if (env.type === 'stream:error') { onState('error', `${env.code}: ${env.message}`); return; }
      if (env.type?.startsWith('stream:')) return;
      if (sub.job_id && env.job_id === sub.job_id) {
        if (env.seq <= lastSeq) return;
        lastSeq = env.seq;
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
    get lastSeq() { return lastSeq; },
  };
}
