package placement

// reshapeHTTP is POST /reshaper (1.30). Not implemented yet: it answers
// 501 so callers fail loudly instead of half-applying a reshape.
func (s *Service) reshapeHTTP(c *reqCtx) error {
	return &httpError{status: 501, detail: "POST /reshaper is not implemented by Berth yet"}
}
