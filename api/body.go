package api

import (
	"fmt"
	"net/http"

	"github.com/berth-project/berth/internal/httpserve"
)

// maxBodyBytes bounds every compute API request body. The largest, a
// server create with its hints, is a few KiB; a body past it is not a
// request but an attempt to make the process read.
const maxBodyBytes = 1 << 20

// writeBodyError answers a request body that could not be decoded: Nova's
// 413 overLimit ("Request is too large.", its sizelimit middleware's
// words) when it is over maxBodyBytes, 400 badRequest otherwise.
func writeBodyError(w http.ResponseWriter, err error) {
	if _, tooLarge := httpserve.BodyTooLarge(err); tooLarge {
		writeError(w, http.StatusRequestEntityTooLarge, "Request is too large.")
		return
	}
	writeError(w, http.StatusBadRequest, fmt.Sprintf("Malformed request body: %v", err))
}
