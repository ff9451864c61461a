-- Workflows (issue 21): a chain skill may be written as a workflow file in GitHub Actions
-- syntax instead of a chain block. The file is kept as written (its line numbers are what
-- validation reports); the dispatcher compiles it to a chain at each dispatch. A chain
-- skill has exactly one of the two.

-- +goose Up
ALTER TABLE skills ADD COLUMN workflow text;
ALTER TABLE skills ADD CONSTRAINT skills_workflow_check
    CHECK (workflow IS NULL OR (execution_type = 'chain' AND chain IS NULL));

-- +goose Down
ALTER TABLE skills DROP CONSTRAINT skills_workflow_check;
ALTER TABLE skills DROP COLUMN workflow;
