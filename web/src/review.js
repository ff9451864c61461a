// A reviewer's decision on a held or paused run, shared by the review queue, a chain's held
// step and an autonomous run's approval node: POST /api/v1/dispatch/{id}/approve|reject with
// the reason (required to reject, optional to approve).
import { useState } from 'preact/hooks';
import { api } from './api.js';

/** useReview returns {reason, setReason, busy, error, send}; send('approve'|'reject') posts the
 * decision and calls onDone(what), or keeps the error (and hands it to onError when given). */
export function useReview(jobId, onDone, onError) {
  const [reason, setReason] = useState('');
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState(null);
  const send = async (what) => {
    setBusy(true);
    setError(null);
    try {
      await api('POST', `/dispatch/${jobId}/${what}`, { reason });
      onDone?.(what);
    } catch (err) {
      setError(err);
      onError?.(err);
    } finally { setBusy(false); }
  };
  return { reason, setReason, busy, error, send };
}
