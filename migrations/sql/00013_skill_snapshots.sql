-- Every run used to carry its own copy of its skill's JSON snapshot (runs.skill_snapshot, about
-- half of a run row): Postgres parsed it into jsonb on every dispatch and wrote it to the WAL,
-- and the dispatcher's grouped commit is its latency. Now a skill version's snapshot is stored
-- once, content-addressed, and a run references it by digest.
--
-- digest = SHA-256 over the organisation's id and the snapshot's JSON bytes (the dispatcher's
-- store.SnapshotDigest), so one organisation's row is never shared with another's and goes
-- with its organisation. A row is immutable: a digest names exactly one content.
--
-- Deliberately no reference to skills: a run's snapshot is its audit record and must outlive
-- the skill, while skill_history rows are deleted with their skill and runs.skill_id is set to
-- NULL. Nothing deletes a snapshot but its organisation's deletion (dispatchers remember which
-- snapshots they have stored).
--
-- Runs recorded before keep their inline snapshot; new runs write only the digest. Readers
-- take COALESCE(skill_snapshots.snapshot, runs.skill_snapshot).
--
-- Both constraints on runs are NOT VALID: every existing row already satisfies them
-- (skill_snapshot was NOT NULL, the digest column is new), so validating would only scan the
-- whole runs table under this ALTER's exclusive lock while dispatches wait. New and updated
-- rows are checked all the same. runs.skill_snapshot_digest has no index: it would cost every
-- run insert an index entry to speed up only an organisation's deletion, whose check of each
-- snapshot it deletes then reads the runs table.

-- +goose Up
CREATE TABLE skill_snapshots (
    digest     bytea PRIMARY KEY CHECK (octet_length(digest) = 32),
    org_id     uuid NOT NULL REFERENCES orgs (id) ON DELETE CASCADE,
    snapshot   jsonb NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);
ALTER TABLE runs
    ADD COLUMN skill_snapshot_digest bytea,
    ALTER COLUMN skill_snapshot DROP NOT NULL,
    ADD CONSTRAINT runs_skill_snapshot_digest_fkey FOREIGN KEY (skill_snapshot_digest)
        REFERENCES skill_snapshots (digest) NOT VALID,
    ADD CONSTRAINT runs_skill_snapshot_present
        CHECK (skill_snapshot IS NOT NULL OR skill_snapshot_digest IS NOT NULL) NOT VALID;

-- +goose Down
-- Runs recorded since get their snapshot back inline before the reference goes.
UPDATE runs r SET skill_snapshot = s.snapshot
    FROM skill_snapshots s
    WHERE s.digest = r.skill_snapshot_digest AND r.skill_snapshot IS NULL;
ALTER TABLE runs
    DROP CONSTRAINT runs_skill_snapshot_present,
    DROP CONSTRAINT runs_skill_snapshot_digest_fkey,
    DROP COLUMN skill_snapshot_digest,
    ALTER COLUMN skill_snapshot SET NOT NULL;
DROP TABLE skill_snapshots;
