package api

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/switchyard-ai/switchyard/client/apitypes"
	"github.com/switchyard-ai/switchyard/dispatcher/internal/chain"
	"github.com/switchyard-ai/switchyard/dispatcher/internal/dispatch"
	"github.com/switchyard-ai/switchyard/dispatcher/internal/workflow"
	"github.com/switchyard-ai/switchyard/runstore"
)

// Chains: GET /api/v1/chains/{id} and the list read the chain tables through the run
// store; cancel goes through the coordinator (one transition under the chain's lock),
// rerun through the dispatch pipeline (a new chain, governed like any dispatch).

var chainStatuses = []string{apitypes.ChainRunning, apitypes.ChainCompleted, apitypes.ChainFailed,
	apitypes.ChainCancelled, apitypes.ChainTimedOut}

func (s *Server) chainID(c echo.Context) (string, error) {
	id := c.Param("id")
	if uuid.Validate(id) != nil {
		return "", dispatch.ChainNotFound(id)
	}
	return id, nil
}

func (s *Server) getChain(c echo.Context) error {
	id, err := s.chainID(c)
	if err != nil {
		return err
	}
	v, err := runstore.New(s.DB).GetChain(c.Request().Context(), principal(c).OrgID, id)
	if errors.Is(err, runstore.ErrChainNotFound) {
		return dispatch.ChainNotFound(id)
	}
	if err != nil {
		return dispatchDBError(err)
	}
	out, err := chainView(v, time.Now())
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, out)
}

// chainView is a stored chain as the API shows it.
func chainView(v runstore.ChainView, now time.Time) (apitypes.Chain, error) {
	def, errs := chain.Parse(v.Definition, nil)
	if errs != nil {
		return apitypes.Chain{}, dispatchDBError(errors.New("chain " + v.ID + ": stored definition does not parse"))
	}
	out := apitypes.Chain{ChainID: v.ID, JobID: v.JobID, JobType: v.JobType, TraceID: v.TraceID, Status: v.Status,
		CostUSD: v.CostUSD, CostCeilingUSD: v.CostCeilingUSD, OnFailure: def.OnFailure, RerunOf: v.RerunOf,
		Error: v.Error, CreatedAt: v.CreatedAt, DeadlineAt: v.DeadlineAt, FinishedAt: v.FinishedAt,
		Steps: []apitypes.ChainStep{}}
	st := &chain.State{ID: v.ID, Status: v.Status, Def: def}
	for _, d := range def.Steps {
		var whole *runstore.ChainStep
		var insts []runstore.ChainStep
		for i := range v.Steps {
			switch r := &v.Steps[i]; {
			case r.StepID != d.StepID:
			case r.Instance == chain.Whole:
				whole = r
			default:
				insts = append(insts, *r)
			}
		}
		rows := insts
		if len(rows) == 0 {
			rows = []runstore.ChainStep{{StepID: d.StepID, Instance: chain.Whole, Status: chain.Pending}}
			if whole != nil {
				rows[0] = *whole
			}
		}
		for _, r := range rows {
			step := apitypes.ChainStep{StepID: d.StepID, JobID: r.RunID, JobType: d.JobType, Status: stepStatus(r),
				DependsOn: slices.Concat([]string{}, d.DependsOn), Attempt: r.Attempt, Reason: r.Reason, Reused: r.Reused,
				Output: r.Output, Error: r.Error, StartedAt: r.StartedAt, FinishedAt: r.FinishedAt, CostUSD: r.CostUSD,
				Job: d.Job, Matrix: d.Matrix}
			if r.Instance != chain.Whole {
				step.Instance = new(r.Instance)
				step.Instances = new(len(insts))
			} else if whole != nil && whole.Instances != nil {
				step.Instances = new(*whole.Instances)
			}
			out.Steps = append(out.Steps, step)
			st.Steps = append(st.Steps, &chain.StepRow{ChainStep: r})
		}
		if len(insts) > 0 && whole != nil {
			st.Steps = append(st.Steps, &chain.StepRow{ChainStep: *whole})
		}
	}
	out.Progress = chain.Progress(st, now)
	if def.Workflow != nil {
		view, err := workflow.View(def, st)
		if err != nil {
			return apitypes.Chain{}, dispatchDBError(fmt.Errorf("chain %s: %w", v.ID, err))
		}
		out.Workflow = view
	}
	return out, nil
}

// stepStatus is a step's status as the API shows it: the run's own while it is
// dispatched, the step's end otherwise (pending before).
func stepStatus(r runstore.ChainStep) string {
	switch {
	case r.Status == chain.Dispatched && r.RunStatus != "":
		return r.RunStatus
	case r.Status == chain.Failed && r.RunStatus != "" && r.RunStatus != "completed":
		return r.RunStatus // failed, timed_out or rejected: the run says which
	}
	return r.Status
}

func (s *Server) listChains(c echo.Context) error {
	f := runstore.ChainListFilter{Limit: 50, JobType: c.QueryParam("job_type"), Status: c.QueryParam("status")}
	if f.Status != "" && !slices.Contains(chainStatuses, f.Status) {
		return badQuery("status", "unknown chain status "+strconv.Quote(f.Status))
	}
	var err error
	if f.Limit, f.AfterCreated, f.AfterID, err = page(c, f.Limit); err != nil {
		return err
	}
	rows, err := runstore.New(s.DB).ListChains(c.Request().Context(), principal(c).OrgID, f)
	if err != nil {
		return dispatchDBError(err)
	}
	out := apitypes.ChainList{Items: make([]apitypes.ChainSummary, 0, len(rows))}
	for _, r := range rows {
		steps := 0
		var weight, done float64
		if def, errs := chain.Parse(r.Definition, nil); errs == nil {
			steps = len(def.Steps)
			weight, done = float64(steps), float64(r.StepsEnded)
		}
		sum := apitypes.ChainSummary{ChainID: r.ID, JobID: r.JobID, JobType: r.JobType, Status: r.Status,
			CostUSD: r.CostUSD, Steps: steps, RerunOf: r.RerunOf, CreatedAt: r.CreatedAt, FinishedAt: r.FinishedAt,
			Progress: 1}
		if r.Status == apitypes.ChainRunning && weight > 0 {
			sum.Progress = float64(int(done/weight*1000)) / 1000 // by steps: the list does not read them
		}
		out.Items = append(out.Items, sum)
	}
	if len(rows) == f.Limit {
		last := rows[len(rows)-1]
		out.NextCursor = encodeCursor(last.CreatedAt, last.ID)
	}
	return c.JSON(http.StatusOK, out)
}

func (s *Server) cancelChain(c echo.Context) error {
	id, err := s.chainID(c)
	if err != nil {
		return err
	}
	p := principal(c)
	status, err := s.Dispatch.Chains.Cancel(c.Request().Context(), p.OrgID, id, p.Actor())
	if err != nil {
		return err
	}
	v, err := runstore.New(s.DB).GetChain(c.Request().Context(), p.OrgID, id)
	if err != nil {
		return dispatchDBError(err)
	}
	return c.JSON(http.StatusOK, apitypes.ChainControl{ChainID: id, JobID: v.JobID, Status: status})
}

func (s *Server) rerunChain(c echo.Context) error {
	id, err := s.chainID(c)
	if err != nil {
		return err
	}
	res, reused, err := s.Dispatch.Rerun(c.Request().Context(), principal(c), id)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusAccepted, apitypes.ChainControl{ChainID: res.ChainID, JobID: res.JobID,
		Status: apitypes.ChainRunning, RerunOf: id, Reused: reused})
}
