// Switchyard's browser UI: sign-in, live dashboard with span trees, skill bindings and the
// review queue, usage. Hash routes (#/runs, #/runs/<id>, #/chains/<id>, #/skills, #/skills/<job_type>, #/reviews, #/usage)
// so the dispatcher serves one index.html.
import { render } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { api, setUnauthenticatedHandler } from './api.js';
import { html, Loading } from './ui.js';
import { SignIn } from './pages/signin.js';
import { Runs } from './pages/runs.js';
import { RunView } from './pages/run.js';
import { ChainView } from './pages/chain.js';
import { Skills, SkillEdit } from './pages/skills.js';
import { Reviews } from './pages/reviews.js';
import { Providers } from './pages/providers.js';
import { Usage } from './pages/usage.js';
import './style.css';

function useHash() {
  const [hash, setHash] = useState(location.hash || '#/runs');
  useEffect(() => {
    const on = () => setHash(location.hash || '#/runs');
    addEventListener('hashchange', on);
    return () => removeEventListener('hashchange', on);
  }, []);
  return hash;
}

function App() {
  const [me, setMe] = useState(undefined); // undefined: checking; null: signed out
  const hash = useHash();
  useEffect(() => {
    setUnauthenticatedHandler(() => setMe(null));
    api('GET', '/session').then(setMe, () => setMe(null));
  }, []);
  if (me === undefined) return html`<${Loading} what="session" />`;
  if (me === null) return html`<${SignIn} onSignedIn=${setMe} />`;

  const parts = hash.replace(/^#\/?/, '').split('/').map(decodeURIComponent);
  let page;
  if (parts[0] === 'runs' && parts[1]) page = html`<${RunView} id=${parts[1]} key=${parts[1]} />`;
  else if (parts[0] === 'chains' && parts[1]) page = html`<${ChainView} chainId=${parts[1]} key=${parts[1]} />`;
  else if (parts[0] === 'skills' && parts[1]) page = html`<${SkillEdit} jobType=${parts[1]} key=${parts[1]} me=${me} />`;
  else if (parts[0] === 'skills') page = html`<${Skills} me=${me} />`;
  else if (parts[0] === 'reviews') page = html`<${Reviews} me=${me} />`;
  else if (parts[0] === 'providers') page = html`<${Providers} me=${me} />`;
  else if (parts[0] === 'usage') page = html`<${Usage} />`;
  else page = html`<${Runs} me=${me} />`;

  const signOut = async () => {
    try { await api('DELETE', '/session'); } catch { /* signed out either way */ }
    setMe(null);
  };
  const tab = (href, label) =>
    html`<a href=${href} class=${hash.startsWith(href) || (href === '#/runs' && hash.startsWith('#/chains')) ? 'active' : ''}>${label}</a>`;
  return html`<div class="shell">
    <header>
      <span class="brand">Switchyard</span>
      <nav>${tab('#/runs', 'Live dashboard')}${tab('#/skills', 'Skill bindings')}${tab('#/reviews', 'Review queue')}${me.roles.includes('admin') ? tab('#/providers', 'Providers') : null}${me.roles.includes('admin') ? tab('#/usage', 'Usage') : null}</nav>
      <span class="who" data-testid="who">${me.keyName} · org ${me.orgId.slice(0, 8)} · ${me.roles.join(', ')}</span>
      <button class="link" onClick=${signOut} data-testid="signout">Sign out</button>
    </header>
    <main>${page}</main>
  </div>`;
}

render(html`<${App} />`, document.getElementById('app'));
