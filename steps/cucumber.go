package steps

import (
	"encoding/json"
	"fmt"
	"os"
)

// markNotRunCucumber adds to godog's Cucumber JSON file at path (none when
// "") why each scenario not run was skipped: the error_message of its
// first skipped step, the one place the format has for a reason. godog
// already wrote those steps as skipped, not failed. Keys come out sorted
// (encoding/json's maps), so the file stays the same for the same run.
func markNotRunCucumber(path string, results []scenarioResult) error {
	if path == "" {
		return nil
	}
	type key struct{ uri, name string }
	notRun := map[key]string{}
	for _, r := range results {
		if r.Result == NotRun || r.Result == ExpectedFailure {
			notRun[key{r.File, r.Name}] = r.Message
		}
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("cucumber json: %w", err)
	}
	var doc []map[string]json.RawMessage
	if err := json.Unmarshal(b, &doc); err != nil {
		return fmt.Errorf("cucumber json: %s: %w", path, err)
	}
	for _, f := range doc {
		var uri string
		var elements []map[string]json.RawMessage
		if json.Unmarshal(f["uri"], &uri) != nil || json.Unmarshal(f["elements"], &elements) != nil {
			continue
		}
		for _, e := range elements {
			var name string
			if json.Unmarshal(e["name"], &name) != nil {
				continue
			}
			msg, ok := notRun[key{uri, name}]
			if !ok {
				continue
			}
			if err := markFirstSkipped(e, msg); err != nil {
				return fmt.Errorf("cucumber json: %s: %w", path, err)
			}
		}
		raw, err := json.Marshal(elements)
		if err != nil {
			return err
		}
		f["elements"] = raw
	}
	out, err := json.MarshalIndent(doc, "", "    ")
	if err != nil {
		return fmt.Errorf("cucumber json: %w", err)
	}
	if err := os.WriteFile(path, out, 0o644); err != nil {
		return fmt.Errorf("cucumber json: %w", err)
	}
	return nil
}

// markFirstSkipped sets msg as the error_message of the first skipped
// step of a scenario element (none: it ran, e.g. an outline's example that
// passed).
func markFirstSkipped(e map[string]json.RawMessage, msg string) error {
	var steps []map[string]json.RawMessage
	if err := json.Unmarshal(e["steps"], &steps); err != nil {
		return err
	}
	for _, st := range steps {
		var res map[string]any
		if json.Unmarshal(st["result"], &res) != nil || res["status"] != "skipped" {
			continue
		}
		res["error_message"] = msg
		raw, err := json.Marshal(res)
		if err != nil {
			return err
		}
		st["result"] = raw
		raw, err = json.Marshal(steps)
		if err != nil {
			return err
		}
		e["steps"] = raw
		return nil
	}
	return nil
}
