package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strings"

	"github.com/pmezard/go-difflib/difflib"
	"github.com/spf13/cobra"

	"github.com/switchyard-ai/switchyard/client"
	"github.com/switchyard-ai/switchyard/shared/skill"
)

func (a *app) skillsCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "skills", Short: "Read and sync skill bindings"}
	cmd.AddCommand(a.skillsListCmd(), a.skillsShowCmd(), a.skillsApplyCmd(),
		a.skillsToggleCmd("enable"), a.skillsToggleCmd("disable"))
	return cmd
}

func (a *app) skillsListCmd() *cobra.Command {
	var q string
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the organisation's skill bindings",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			skills, err := a.client.Skills.List(cmd.Context(), q)
			if err != nil {
				return err
			}
			if a.json() {
				return a.emit(orEmpty(skills))
			}
			w := a.table()
			fmt.Fprintln(w, "JOB TYPE\tVERSION\tENABLED\tEXECUTION\tRISK\tRESIDENCY\tQUEUE\tDESCRIPTION")
			for _, s := range skills {
				fmt.Fprintf(w, "%s\t%d\t%t\t%s\t%s\t%s\t%s\t%s\n", s.JobType, s.Version, s.Enabled, s.ExecutionType,
					s.RiskLevel, s.DataResidency, s.Queue, truncate(s.Description, 50))
			}
			return w.Flush()
		},
	}
	cmd.Flags().StringVarP(&q, "query", "q", "", "filter by job type or description")
	return cmd
}

func (a *app) skillsShowCmd() *cobra.Command {
	var history bool
	cmd := &cobra.Command{
		Use:   "show JOB_TYPE",
		Short: "Show one binding (with --history, every change with who and when)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if history {
				changes, err := a.client.Skills.History(cmd.Context(), args[0])
				if err != nil {
					return err
				}
				if a.json() {
					return a.emit(orEmpty(changes))
				}
				w := a.table()
				fmt.Fprintln(w, "VERSION\tACTION\tBY\tAT")
				for _, c := range changes {
					fmt.Fprintf(w, "%d\t%s\t%s\t%s\n", c.Version, c.Action, c.ChangedBy, c.ChangedAt.Local().Format("2006-01-02 15:04:05"))
				}
				return w.Flush()
			}
			s, err := a.client.Skills.Get(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if a.json() {
				return a.emit(s)
			}
			fields := specFields(s.SkillSpec)
			w := a.table()
			fmt.Fprintf(w, "version\t%d (updated %s by %s)\n", s.Version, s.UpdatedAt.Local().Format("2006-01-02 15:04:05"), s.UpdatedBy)
			for _, k := range sortedKeys(fields) {
				fmt.Fprintf(w, "%s\t%s\n", k, compact(fields[k]))
			}
			return w.Flush()
		},
	}
	cmd.Flags().BoolVar(&history, "history", false, "show the change history instead")
	return cmd
}

func (a *app) skillsToggleCmd(verb string) *cobra.Command {
	return &cobra.Command{
		Use:   verb + " JOB_TYPE",
		Short: strings.ToUpper(verb[:1]) + verb[1:] + " a binding (role skills_admin)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			do := a.client.Skills.Enable
			if verb == "disable" {
				do = a.client.Skills.Disable
			}
			s, err := do(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if a.json() {
				return a.emit(s)
			}
			fmt.Fprintf(a.out, "%s %sd (version %d)\n", args[0], verb, s.Version)
			return nil
		},
	}
}

// skillChange is one binding that apply would create or update.
type skillChange struct {
	JobType string        `json:"jobType"`
	Action  string        `json:"action"` // create or update
	Fields  []fieldChange `json:"fields"`
	spec    client.SkillSpec
}

// fieldChange is one field that differs between the registry and the file.
type fieldChange struct {
	Field string `json:"field"`
	From  any    `json:"from"`
	To    any    `json:"to"`
}

func (a *app) skillsApplyCmd() *cobra.Command {
	return a.applyCmd(fileCatalogue{command: "skills", dir: "skills", load: skill.LoadDir,
		managed: func(s client.Skill) bool { return s.Workflow == "" }})
}

// fileCatalogue is a directory of files that apply syncs into the skill registry: skills/
// (bindings) or workflows/ (chain skills written as workflows).
type fileCatalogue struct {
	command, dir string
	load         func(dir string) ([]skill.Skill, error)
	// managed tells which of the registry's skills such files define (the others are not
	// listed as having no file).
	managed func(client.Skill) bool
}

func (a *app) applyCmd(cat fileCatalogue) *cobra.Command {
	var dir string
	var yes, dryRun bool
	cmd := &cobra.Command{
		Use:   "apply",
		Short: "Sync " + cat.dir + "/ into the registry, showing the diff first",
		Long: "apply reads every *.yaml of --dir (default " + cat.dir + "/), compares each with the registry\n" +
			"and prints what would change: new bindings and, for changed ones, each field from → to. It then\n" +
			"asks for confirmation (--yes skips the question; --dry-run only prints). Bindings in the registry\n" +
			"that have no file are listed and left alone.",
		Example: "  yard " + cat.command + " apply --dry-run\n  yard " + cat.command + " apply --dir ./" + cat.dir + " --yes",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			local, err := cat.load(dir)
			if err != nil {
				return usageError{err}
			}
			all, err := a.client.Skills.List(cmd.Context(), "")
			if err != nil {
				return err
			}
			var remote []client.Skill
			for _, r := range all {
				if cat.managed(r) || slices.ContainsFunc(local, func(l skill.Skill) bool { return l.JobType == r.JobType }) {
					remote = append(remote, r)
				}
			}
			changes, unchanged, orphans, err := diffSkills(local, remote)
			if err != nil {
				return err
			}
			a.printDiff(changes, unchanged, orphans)
			applied := []client.Skill{}
			if len(changes) == 0 || dryRun {
				if a.json() {
					return a.emit(map[string]any{"changes": orEmpty(changes), "unchanged": orEmpty(unchanged), "unmanaged": orEmpty(orphans), "applied": applied})
				}
				return nil
			}
			if !yes {
				ok, err := a.confirm(fmt.Sprintf("Apply %d change(s) to %s?", len(changes), a.client.BaseURL()))
				if err != nil {
					return err
				}
				if !ok {
					return errors.New("aborted: nothing was applied")
				}
			}
			for _, c := range changes {
				s, _, err := a.client.Skills.Put(cmd.Context(), c.spec)
				if err != nil {
					return fmt.Errorf("applying %s (after %d applied): %w", c.JobType, len(applied), err)
				}
				applied = append(applied, s)
				if !a.json() {
					fmt.Fprintf(a.out, "%sd %s (version %d)\n", c.Action, c.JobType, s.Version)
				}
			}
			if a.json() {
				return a.emit(map[string]any{"changes": orEmpty(changes), "unchanged": orEmpty(unchanged), "unmanaged": orEmpty(orphans), "applied": applied})
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&dir, "dir", cat.dir, "directory of the YAML files")
	f.BoolVarP(&yes, "yes", "y", false, "apply without asking")
	f.BoolVar(&dryRun, "dry-run", false, "print the diff and change nothing")
	return cmd
}

// diffSkills compares the catalogue with the registry. Fields are compared in their JSON
// form, which both sides share; the registry's bookkeeping (id, version, updated_*) is not
// part of a binding.
func diffSkills(local []skill.Skill, remote []client.Skill) (changes []skillChange, unchanged, orphans []string, err error) {
	byType := make(map[string]client.Skill, len(remote))
	for _, r := range remote {
		byType[r.JobType] = r
	}
	seen := map[string]bool{}
	for _, l := range local {
		seen[l.JobType] = true
		spec, err := toSpec(l)
		if err != nil {
			return nil, nil, nil, err
		}
		want := specFields(spec)
		r, exists := byType[l.JobType]
		if !exists {
			c := skillChange{JobType: l.JobType, Action: "create", spec: spec}
			for _, k := range sortedKeys(want) {
				c.Fields = append(c.Fields, fieldChange{Field: k, To: want[k]})
			}
			changes = append(changes, c)
			continue
		}
		have := specFields(r.SkillSpec)
		c := skillChange{JobType: l.JobType, Action: "update", spec: spec}
		keys := map[string]bool{}
		for k := range want {
			keys[k] = true
		}
		for k := range have {
			keys[k] = true
		}
		for _, k := range sortedKeys(keys) {
			if !reflect.DeepEqual(want[k], have[k]) {
				c.Fields = append(c.Fields, fieldChange{Field: k, From: have[k], To: want[k]})
			}
		}
		if len(c.Fields) == 0 {
			unchanged = append(unchanged, l.JobType)
			continue
		}
		changes = append(changes, c)
	}
	for _, r := range remote {
		if !seen[r.JobType] {
			orphans = append(orphans, r.JobType)
		}
	}
	sort.Strings(orphans)
	return changes, unchanged, orphans, nil
}

// toSpec converts a parsed YAML binding to the API's form; both use the same JSON names.
func toSpec(s skill.Skill) (client.SkillSpec, error) {
	b, err := json.Marshal(s)
	if err != nil {
		return client.SkillSpec{}, fmt.Errorf("encoding skill %s: %w", s.JobType, err)
	}
	var spec client.SkillSpec
	if err := json.Unmarshal(b, &spec); err != nil {
		return client.SkillSpec{}, fmt.Errorf("encoding skill %s: %w", s.JobType, err)
	}
	return spec, nil
}

// specFields is a binding as a map of its set fields (JSON values), for comparison and
// display. Empty values are left out so "absent" and "empty" compare equal.
func specFields(s client.SkillSpec) map[string]any {
	b, _ := json.Marshal(s)
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	for k, v := range m {
		switch x := v.(type) {
		case nil:
			delete(m, k)
		case string:
			if x == "" {
				delete(m, k)
			}
		case []any:
			if len(x) == 0 {
				delete(m, k)
			}
		}
	}
	delete(m, "job_type")
	return m
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// printDiff shows what apply would change (text mode only; json mode emits the changes).
func (a *app) printDiff(changes []skillChange, unchanged, orphans []string) {
	if a.json() {
		return
	}
	for _, c := range changes {
		if c.Action == "create" {
			fmt.Fprintf(a.out, "+ %s (new)\n", c.JobType)
			for _, f := range c.Fields {
				fmt.Fprintf(a.out, "    %s: %s\n", f.Field, truncate(compact(f.To), 100))
			}
			continue
		}
		fmt.Fprintf(a.out, "~ %s\n", c.JobType)
		for _, f := range c.Fields {
			if f.Field == "workflow" { // a file: its lines that changed
				fmt.Fprintf(a.out, "    workflow:\n%s", textDiff(f.From, f.To))
				continue
			}
			fmt.Fprintf(a.out, "    %s: %s → %s\n", f.Field, shown(f.From), shown(f.To))
		}
	}
	for _, o := range orphans {
		fmt.Fprintf(a.out, "? %s is in the registry but has no file (left alone)\n", o)
	}
	switch {
	case len(changes) == 0:
		fmt.Fprintf(a.out, "Registry is up to date (%d unchanged).\n", len(unchanged))
	default:
		fmt.Fprintf(a.out, "%d to apply, %d unchanged.\n", len(changes), len(unchanged))
	}
}

// textDiff is a unified diff of two texts, indented under its field.
func textDiff(from, to any) string {
	a, _ := from.(string)
	b, _ := to.(string)
	d, _ := difflib.GetUnifiedDiffString(difflib.UnifiedDiff{A: difflib.SplitLines(a), B: difflib.SplitLines(b),
		FromFile: "registry", ToFile: "file", Context: 1})
	var out strings.Builder
	for line := range strings.SplitAfterSeq(d, "\n") {
		if line != "" {
			out.WriteString("      " + line)
		}
	}
	return out.String()
}

func shown(v any) string {
	if v == nil {
		return "(unset)"
	}
	return truncate(compact(v), 60)
}

// confirm asks a yes/no question on the command's streams; anything but y/yes is no.
func (a *app) confirm(question string) (bool, error) {
	fmt.Fprintf(a.errOut, "%s [y/N] ", question)
	line, err := bufio.NewReader(a.in).ReadString('\n')
	if err != nil && line == "" {
		fmt.Fprintln(a.errOut)
		return false, nil
	}
	ans := strings.ToLower(strings.TrimSpace(line))
	return ans == "y" || ans == "yes", nil
}
