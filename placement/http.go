package placement

import "net/http"

// HandlerOptions configure the Placement HTTP API.
type HandlerOptions struct {
	Auth AuthConfig
}

// AuthConfig says how requests are authenticated.
type AuthConfig struct {
	// Mode is "noauth" (Placement's noauth2: token "admin" is an admin,
	// "user:project" a user) or "tokens" (Tokens maps each token).
	Mode   string
	Tokens map[string]TokenInfo
}

// TokenInfo is what a configured token stands for.
type TokenInfo struct {
	UserID    string
	ProjectID string
	Roles     []string
}

// Handler serves the Placement API.
func (s *Service) Handler() http.Handler {
	s.handlerOnce.Do(func() { s.handler = s.newRouter() })
	return s.handler
}

func (s *Service) newRouter() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"versions":[{"id":"v1.0","max_version":"1.39","min_version":"1.0","status":"CURRENT","links":[{"rel":"self","href":""}]}]}`))
	})
	return mux
}
