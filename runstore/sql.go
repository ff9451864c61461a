package runstore

import _ "embed"

// The static statements, one file each in sql/. Each file's leading comment says what it
// does and what its parameters are.

var (
	//go:embed sql/abandon_spans.sql
	abandonSpansSQL string

	//go:embed sql/add_hold_reasons.sql
	addHoldReasonsSQL string

	//go:embed sql/announced.sql
	announcedSQL string

	//go:embed sql/append_journal.sql
	appendJournalSQL string

	//go:embed sql/callback_done.sql
	callbackDoneSQL string

	//go:embed sql/callback_retry.sql
	callbackRetrySQL string

	//go:embed sql/cancel_requested.sql
	cancelRequestedSQL string

	//go:embed sql/chain_runs.sql
	chainRunsSQL string

	//go:embed sql/claim_callbacks.sql
	claimCallbacksSQL string

	//go:embed sql/claim_work.sql
	claimWorkSQL string

	//go:embed sql/delete_runs.sql
	deleteRunsSQL string

	//go:embed sql/enqueue_info.sql
	enqueueInfoSQL string

	//go:embed sql/get_run.sql
	getRunSQL string

	//go:embed sql/insert_batch.sql
	insertBatchSQL string

	//go:embed sql/insert_runs.sql
	insertRunsSQL string

	//go:embed sql/journal_llm_answer.sql
	journalLlmAnswerSQL string

	//go:embed sql/journaled.sql
	journaledSQL string

	//go:embed sql/last_event_data.sql
	lastEventDataSQL string

	//go:embed sql/list_runs.sql
	listRunsSQL string

	//go:embed sql/list_spans.sql
	listSpansSQL string

	//go:embed sql/live_runs.sql
	liveRunsSQL string

	//go:embed sql/load_work.sql
	loadWorkSQL string

	//go:embed sql/record_events.sql
	recordEventsSQL string

	//go:embed sql/record_firsts.sql
	recordFirstsSQL string

	//go:embed sql/replay_events.sql
	replayEventsSQL string

	//go:embed sql/request_cancel.sql
	requestCancelSQL string

	//go:embed sql/result.sql
	resultSQL string

	//go:embed sql/run_chain.sql
	runChainSQL string

	//go:embed sql/runs_by_idempotency_keys.sql
	runsByIdempotencyKeysSQL string

	//go:embed sql/save_spans.sql
	saveSpansSQL string

	//go:embed sql/skill_snapshot.sql
	skillSnapshotSQL string

	//go:embed sql/status.sql
	statusSQL string

	//go:embed sql/stranded.sql
	strandedSQL string

	//go:embed sql/insert_chain.sql
	insertChainSQL string

	//go:embed sql/lock_chain.sql
	lockChainSQL string

	//go:embed sql/chain_steps.sql
	chainStepsSQL string

	//go:embed sql/save_chain_steps.sql
	saveChainStepsSQL string

	//go:embed sql/update_chain.sql
	updateChainSQL string

	//go:embed sql/step_run_end.sql
	stepRunEndSQL string

	//go:embed sql/pending_steps.sql
	pendingStepsSQL string

	//go:embed sql/expire_approvals.sql
	expireApprovalsSQL string

	//go:embed sql/get_chain.sql
	getChainSQL string

	//go:embed sql/list_chains.sql
	listChainsSQL string

	//go:embed sql/chains_to_repair.sql
	chainsToRepairSQL string

	//go:embed sql/delete_chain.sql
	deleteChainSQL string

	//go:embed sql/save_snapshot.sql
	saveSnapshotSQL string

	//go:embed sql/load_snapshot.sql
	loadSnapshotSQL string
)
