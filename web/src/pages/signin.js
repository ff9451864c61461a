import { useState } from 'preact/hooks';
import { api } from '../api.js';
import { html, ErrorBox } from '../ui.js';

/** SignIn exchanges an API key for the HttpOnly session cookie; the key is not kept. */
export function SignIn({ onSignedIn }) {
  const [key, setKey] = useState('');
  const [error, setError] = useState(null);
  const [busy, setBusy] = useState(false);
  const submit = async (e) => {
    e.preventDefault();
    setBusy(true);
    setError(null);
    try {
      const me = await api('POST', '/session', { api_key: key.trim() });
      setKey('');
      onSignedIn(me);
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  };
  return html`<div class="signin">
    <h1>Switchyard</h1>
    <p>Sign in with an API key. <code>make run</code> writes the development admin key to <code>.run/admin.key</code>.
      The key is exchanged for a session cookie; it is not stored in the browser.</p>
    <form onSubmit=${submit}>
      <label>API key <input type="password" name="api_key" autocomplete="off" value=${key}
        onInput=${(e) => setKey(e.target.value)} required /></label>
      <button type="submit" disabled=${busy}>${busy ? 'Signing in…' : 'Sign in'}</button>
    </form>
    <${ErrorBox} error=${error} />
  </div>`;
}
