package steps

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
)

// rewriteCucumber adds to godog's Cucumber JSON file at path (none when
// "") the verdicts godog does not know. A scenario not run: why it was
// skipped, as the error_message of its first skipped step, the one place
// the format has for a reason (godog already wrote those steps as
// skipped, not failed). A flaky or stale scenario: its last step failed
// with the verdict (godog wrote the last attempt, which may have passed).
// A failed scenario with a bundle: the bundle's path, embedded as text in
// its failed step, as JUnit carries it. Keys come out sorted
// (encoding/json's maps), so the file stays the same for the same run.
func rewriteCucumber(path string, results []scenarioResult) error {
	if path == "" {
		return nil
	}
	// An element's line is its Examples row's for an outline's example,
	// the scenario's otherwise (then Example is 0 and any line matches).
	type key struct {
		uri, name string
		example   int
	}
	notRun := map[key]string{}
	failing := map[key]scenarioResult{}
	for _, r := range results {
		k := key{r.File, r.Name, r.Example}
		switch {
		case r.Result == NotRun || r.Result == ExpectedFailure:
			notRun[k] = r.Message
		case r.Result == Flaky || r.Result == StaleBaseline || r.Bundle != "" || r.Tries > 1:
			failing[k] = r
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
			var line int
			if json.Unmarshal(e["name"], &name) != nil {
				continue
			}
			json.Unmarshal(e["line"], &line)
			k := key{uri, name, line}
			if _, ok := notRun[k]; !ok {
				if _, ok := failing[k]; !ok {
					k.example = 0
				}
			}
			var err error
			if msg, ok := notRun[k]; ok {
				err = markFirstSkipped(e, msg)
			} else if r, ok := failing[k]; ok {
				err = markFailing(e, r)
			}
			if err != nil {
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

// markFailing marks a scenario element of a flaky or stale result failed
// at its last step (or its failed one) with the verdict, and embeds the
// bundle's path in that step.
func markFailing(e map[string]json.RawMessage, r scenarioResult) error {
	var steps []map[string]json.RawMessage
	if err := json.Unmarshal(e["steps"], &steps); err != nil {
		return err
	}
	if len(steps) == 0 {
		return nil
	}
	if r.Tries > 1 && r.Result == Passed {
		// godog wrote the first try, whose steps from the inconclusive one
		// on were skipped; the try that counts passed them all.
		for _, st := range steps {
			res := map[string]any{}
			json.Unmarshal(st["result"], &res)
			if res["status"] == "skipped" {
				res["status"] = "passed"
				raw, err := json.Marshal(res)
				if err != nil {
					return err
				}
				st["result"] = raw
			}
		}
		return embedNote(e, steps, len(steps)-1, "gwdiag: tries", r.Message+"\n")
	}
	// The failed step (for a scenario tried again, the step that failed
	// in the try that counts), or the last.
	at := len(steps) - 1
	for i, st := range steps {
		var res struct{ Status string }
		var name string
		json.Unmarshal(st["name"], &name)
		if json.Unmarshal(st["result"], &res) == nil && res.Status == "failed" || r.Tries > 1 && name == r.Step {
			at = i
			break
		}
	}
	res := map[string]any{}
	json.Unmarshal(steps[at]["result"], &res)
	if r.Result == Flaky || r.Result == StaleBaseline || r.Tries > 1 {
		res["status"], res["error_message"] = "failed", r.Message
	}
	raw, err := json.Marshal(res)
	if err != nil {
		return err
	}
	steps[at]["result"] = raw
	if r.Bundle != "" {
		text := fmt.Sprintf("gwdiag failure bundle: %s (gwdiag conformance replay %s)\n", r.Bundle, r.Bundle)
		return embedNote(e, steps, at, "gwdiag failure bundle", text)
	}
	raw, err = json.Marshal(steps)
	if err != nil {
		return err
	}
	e["steps"] = raw
	return nil
}

// embedNote embeds text, named name, in the step at of a scenario
// element, and writes the steps back into it.
func embedNote(e map[string]json.RawMessage, steps []map[string]json.RawMessage, at int, name, text string) error {
	emb, err := json.Marshal([]map[string]string{{"name": name, "mime_type": "text/plain",
		"data": base64.StdEncoding.EncodeToString([]byte(text))}})
	if err != nil {
		return err
	}
	steps[at]["embeddings"] = emb
	raw, err := json.Marshal(steps)
	if err != nil {
		return err
	}
	e["steps"] = raw
	return nil
}
