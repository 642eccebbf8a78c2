package jobs

import (
	"context"
	"fmt"

	"github.com/idemgate/idemgate/jobs/catalog"
	"github.com/idemgate/idemgate/models"
)

// lookFirst asks the reconcile URL whether the operation took effect already, before an
// attempt of a tool that catalog.Tool.ChecksBeforeSending: the ledger may have lost the
// record of an earlier run (restored from a backup, an asynchronous standby promoted), and
// this downstream would repeat the effect rather than recognise its downstream key. done
// reports that the attempt ends here: the effect was found (SUCCEEDED, with what was found as
// the result), or the look-up got no usable answer (nothing sent; retried as a request that
// was not sent). A 404 means no earlier run took effect: the request is sent.
func (e *Executor) lookFirst(ctx context.Context, tool *catalog.Tool, c models.Claimed, cd callData) (models.AttemptOutcome, bool) {
	resp, failed, traceID, err := e.lookUp(ctx, tool, c.Op, cd, c.Attempt.ID+"-lookup")
	if err != nil {
		return cannotBuild(cd.secrets.Error(err)), true
	}
	result, found, missing := foundIn(tool, resp)
	switch {
	case !failed && (resp.Status == 404 || missing):
		e.meter.Probe(tool.Name, ProbeNotFound)
		return models.AttemptOutcome{}, false
	case !failed && found:
		e.meter.Probe(tool.Name, ProbeFound)
		e.meter.Attempt(tool.Name, string(Succeeded), resp.Latency)
		return models.AttemptOutcome{Class: string(Succeeded), DownstreamStatus: resp.Status, Latency: resp.Latency,
			TraceID: traceID, To: models.StateSucceeded, Result: result, DownstreamRef: foundReference(tool, result),
			Note: "nothing sent: the look-up by downstream key found this operation's effect already made; it is the result"}, true
	}
	e.meter.Probe(tool.Name, ProbeError)
	e.meter.Attempt(tool.Name, string(NotSent), resp.Latency)
	in := e.policyInput(ctx, tool, c, NotSent)
	in.RetryAfter = resp.RetryAfter // held while the downstream is known down: how long
	d := Decide(in)
	out := models.AttemptOutcome{Class: string(NotSent), DownstreamStatus: resp.Status, Latency: resp.Latency, TraceID: traceID,
		To: d.To, ErrorClass: d.ErrorClass, NextAttemptAt: d.NextAttemptAt}
	why := fmt.Sprintf("it answered %d", resp.Status)
	if resp.Err != nil {
		out.Error = resp.Err.Error()
		why = "no answer came: " + out.Error
	} else if resp.BodyErr != nil {
		out.Error = "reading the answer: " + resp.BodyErr.Error()
		why = out.Error
	}
	out.ErrorMessage = "nothing was sent: the look-up that must first show this operation has no effect yet failed (" + why + ")"
	return out, true
}
