package api

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/labstack/echo/v4"

	"github.com/switchyard-ai/switchyard/dispatcher/internal/chain"
	"github.com/switchyard-ai/switchyard/dispatcher/internal/dispatch"
	"github.com/switchyard-ai/switchyard/dispatcher/internal/store"
	"github.com/switchyard-ai/switchyard/shared/apierr"
	"github.com/switchyard-ai/switchyard/shared/skill"
)

func skillNotFound(jobType string) *apierr.Error {
	return apierr.New(http.StatusNotFound, apierr.CodeSkillNotFound, fmt.Sprintf("No skill is bound to job type %q in your organisation.", jobType),
		"List the bindings with GET /api/v1/skills.").With("job_type", jobType)
}

func (s *Server) listSkills(c echo.Context) error {
	skills, err := skill.List(c.Request().Context(), s.DB, principal(c).OrgID)
	if err != nil {
		return dispatchDBError(err)
	}
	q := strings.ToLower(c.QueryParam("q"))
	out := make([]skill.Skill, 0, len(skills))
	for _, sk := range skills {
		if q == "" || strings.Contains(strings.ToLower(sk.JobType+" "+sk.Description), q) {
			out = append(out, sk)
		}
	}
	return c.JSON(http.StatusOK, map[string]any{"items": out})
}

func (s *Server) getSkill(c echo.Context) error {
	sk, err := skill.Get(c.Request().Context(), s.DB, principal(c).OrgID, c.Param("job_type"))
	if errors.Is(err, skill.ErrNotFound) {
		return skillNotFound(c.Param("job_type"))
	}
	if err != nil {
		return dispatchDBError(err)
	}
	return c.JSON(http.StatusOK, sk)
}

func (s *Server) putSkill(c echo.Context) error {
	jobType := c.Param("job_type")
	body := skill.Skill{Enabled: true}
	if err := dispatch.Decode(c.Request().Body, s.Validator, &body); err != nil {
		return err
	}
	if body.JobType != jobType {
		return dispatch.ValidationFailed([]dispatch.FieldError{{Field: "job_type", Rule: "eqpath",
			Message: "must equal the job type in the path (" + jobType + ")"}})
	}
	body.ID, body.OrgID, body.Version, body.UpdatedBy = "", "", 0, ""
	if err := s.checkSkillRefs(c, body); err != nil {
		return err
	}
	return s.saveSkill(c, body)
}

// checkSkillRefs validates what the struct tags cannot: the queue and the tools must exist.
func (s *Server) checkSkillRefs(c echo.Context, sk skill.Skill) error {
	ctx := c.Request().Context()
	var fields []dispatch.FieldError
	q := sk.Queue
	if q == "" {
		q = "default"
	}
	if _, err := store.GetQueue(ctx, s.DB, q); errors.Is(err, store.ErrNotFound) {
		fields = append(fields, dispatch.FieldError{Field: "queue", Rule: "registered",
			Message: "is not a registered queue (GET /api/v1/admin/queues)"})
	} else if err != nil {
		return dispatchDBError(err)
	}
	if len(sk.Tools) > 0 {
		known, err := store.ToolNames(ctx, s.DB, principal(c).OrgID)
		if err != nil {
			return dispatchDBError(err)
		}
		for i, t := range sk.Tools {
			if !known[t] {
				fields = append(fields, dispatch.FieldError{Field: fmt.Sprintf("tools[%d]", i), Rule: "registered",
					Message: fmt.Sprintf("%q is not a tool your organisation may use", t)})
			}
		}
	}
	switch {
	case sk.Workflow != "" && sk.ExecutionType != "chain":
		fields = append(fields, dispatch.FieldError{Field: "workflow", Rule: "execution_type",
			Message: "a workflow is a way to write a chain: give the skill execution_type chain"})
	case sk.Workflow != "" && len(sk.Chain) > 0:
		fields = append(fields, dispatch.FieldError{Field: "workflow", Rule: "excluded_with",
			Message: "a chain skill has a chain block or a workflow, not both"})
	case sk.Workflow != "":
		known, err := s.otherSkills(c, sk)
		if err != nil {
			return err
		}
		if _, err := s.Dispatch.ParseWorkflow(ctx, []byte(sk.Workflow), func(jt string) bool { return known[jt] }); err != nil {
			return err
		}
	case sk.ExecutionType == "chain":
		chainFields, err := s.checkChain(c, sk)
		if err != nil {
			return err
		}
		fields = append(fields, chainFields...)
	case len(sk.Chain) > 0:
		fields = append(fields, dispatch.FieldError{Field: "chain", Rule: "execution_type",
			Message: "a chain block belongs to a skill with execution_type chain"})
	}
	switch {
	case sk.ExecutionType == "autonomous":
		_, problems := skill.ParseAutonomous(sk.Autonomous, sk.Tools)
		fields = append(fields, problems...)
	case len(sk.Autonomous) > 0 && string(sk.Autonomous) != "null":
		fields = append(fields, dispatch.FieldError{Field: "autonomous", Rule: "execution_type",
			Message: "an autonomous block belongs to a skill with execution_type autonomous"})
	}
	if len(fields) > 0 {
		return dispatch.ValidationFailed(fields)
	}
	return nil
}

// checkChain validates a chain skill's definition against the organisation's skills: a
// step dispatches one of them, never the chain itself.
func (s *Server) checkChain(c echo.Context, sk skill.Skill) ([]dispatch.FieldError, error) {
	known, err := s.otherSkills(c, sk)
	if err != nil {
		return nil, err
	}
	_, fields := chain.Parse(sk.Chain, func(jobType string) bool { return known[jobType] })
	return fields, nil
}

// otherSkills are the job types a chain skill's steps may call: the organisation's
// callable skills but itself.
func (s *Server) otherSkills(c echo.Context, sk skill.Skill) (map[string]bool, error) {
	skills, err := skill.List(c.Request().Context(), s.DB, principal(c).OrgID)
	if err != nil {
		return nil, dispatchDBError(err)
	}
	known := make(map[string]bool, len(skills))
	for _, other := range skills {
		known[other.JobType] = other.JobType != sk.JobType && other.Callable()
	}
	return known, nil
}

func (s *Server) saveSkill(c echo.Context, sk skill.Skill) error {
	ctx := c.Request().Context()
	p := principal(c)
	var saved skill.Skill
	var action skill.Action
	err := pgx.BeginFunc(ctx, s.DB, func(tx pgx.Tx) error {
		var err error
		saved, action, err = skill.Put(ctx, tx, p.OrgID, sk, p.Actor())
		return err
	})
	if err != nil {
		return dispatchDBError(err)
	}
	s.Dispatch.Registry.ForgetSkill(p.OrgID, saved.JobType)
	status := http.StatusOK
	if action == skill.Created {
		status = http.StatusCreated
	}
	c.Response().Header().Set("X-Skill-Action", string(action))
	return c.JSON(status, saved)
}

func (s *Server) setSkillEnabled(enabled bool) echo.HandlerFunc {
	return func(c echo.Context) error {
		sk, err := skill.Get(c.Request().Context(), s.DB, principal(c).OrgID, c.Param("job_type"))
		if errors.Is(err, skill.ErrNotFound) {
			return skillNotFound(c.Param("job_type"))
		}
		if err != nil {
			return dispatchDBError(err)
		}
		sk.Enabled = enabled
		return s.saveSkill(c, sk)
	}
}

func (s *Server) skillHistory(c echo.Context) error {
	ctx := c.Request().Context()
	p := principal(c)
	if _, err := skill.Get(ctx, s.DB, p.OrgID, c.Param("job_type")); errors.Is(err, skill.ErrNotFound) {
		return skillNotFound(c.Param("job_type"))
	} else if err != nil {
		return dispatchDBError(err)
	}
	h, err := skill.History(ctx, s.DB, p.OrgID, c.Param("job_type"))
	if err != nil {
		return dispatchDBError(err)
	}
	return c.JSON(http.StatusOK, map[string]any{"items": h})
}
