package dispatch

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"

	"github.com/switchyard-ai/switchyard/dispatcher/internal/auth"
	"github.com/switchyard-ai/switchyard/shared/apierr"
	"github.com/switchyard-ai/switchyard/shared/ids"
)

// MaxBatch is the most items one batch may hold.
const MaxBatch = 500

// BatchRequest is the body of POST /api/v1/dispatch/batch. Items stay raw so each one is
// decoded, validated and answered on its own.
type BatchRequest struct {
	Items []json.RawMessage `json:"items" validate:"required,min=1,max=500"`
}

// BatchItem is the answer for one item: its HTTP status and either the result or the error.
type BatchItem struct {
	Index  int          `json:"index"`
	Status int          `json:"status"`
	Result *Result      `json:"result,omitempty"`
	Error  *apierr.Body `json:"error,omitempty"`
}

// BatchResult is the answer of a batch.
type BatchResult struct {
	BatchID  string      `json:"batchId"`
	Accepted int         `json:"accepted"`
	Failed   int         `json:"failed"`
	Items    []BatchItem `json:"items"`
}

// DispatchBatch dispatches every item on its own: one bad item never fails the others.
func (s *Service) DispatchBatch(ctx context.Context, p auth.Principal, v *Validator, req BatchRequest) (BatchResult, error) {
	res := BatchResult{BatchID: ids.New(), Items: make([]BatchItem, len(req.Items))}
	if _, err := s.DB.Exec(ctx, `INSERT INTO batches (id, org_id, size) VALUES ($1, $2, $3)`,
		res.BatchID, p.OrgID, len(req.Items)); err != nil {
		return res, dbError(err)
	}
	for i, raw := range req.Items {
		item := BatchItem{Index: i}
		var r Request
		err := Decode(bytes.NewReader(raw), v, &r)
		if err == nil {
			var out Result
			out, err = s.Dispatch(ctx, p, r, Options{BatchID: res.BatchID})
			if err == nil {
				item.Status = http.StatusAccepted
				if out.Duplicate {
					item.Status = http.StatusOK
				}
				item.Result = &out
			}
		}
		if err != nil {
			var ae *apierr.Error
			if !errors.As(err, &ae) {
				ae = apierr.Internal(err)
			}
			body := ae.Body()
			item.Status, item.Error = ae.Status, &body
			res.Failed++
		} else {
			res.Accepted++
		}
		res.Items[i] = item
	}
	return res, nil
}
