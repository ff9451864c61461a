-- name: SkillSnapshot :one
-- The skill binding a run ($1) was dispatched with (see enqueue_info.sql).
SELECT COALESCE(s.snapshot, r.skill_snapshot) FROM runs r
LEFT JOIN skill_snapshots s ON s.digest = r.skill_snapshot_digest
WHERE r.id = $1;
