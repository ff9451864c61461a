-- name: ClaimCallbacks :many
-- Claims up to 20 finished runs whose callback is due, with a 60-second lease: a crashed
-- sender's claims come due again after it. Answers each run's id, organisation, callback
-- URL, the organisation's callback secret and allowlist, and the attempts so far.
UPDATE runs r SET callback_next_at = now() + interval '60 seconds'
FROM orgs o
WHERE r.id IN (SELECT id FROM runs
	WHERE callback_url <> '' AND finished_at IS NOT NULL AND callback_done_at IS NULL
	  AND (callback_next_at IS NULL OR callback_next_at <= now())
	ORDER BY callback_next_at NULLS FIRST, finished_at LIMIT 20 FOR UPDATE SKIP LOCKED)
  AND o.id = r.org_id
RETURNING r.id, r.org_id, r.callback_url, o.callback_secret, o.callback_allowlist, r.callback_attempts;
