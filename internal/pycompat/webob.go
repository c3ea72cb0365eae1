package pycompat

import (
	"mime"
	"net/http"
	"strconv"
	"strings"
)

// WebobError writes a webob HTTPException's own page, as the middleware
// and routers below an OpenStack service's faults answer (Nova's router
// and oslo's sizelimit, Glance's router): in the type accept prefers
// (text/html before application/json on a tie; plain text when neither
// is acceptable or there is no Accept). Pass accept "application/json"
// for a page webob writes as JSON whatever the client asked.
func WebobError(w http.ResponseWriter, accept string, status int, title, explanation string) {
	h := w.Header()
	line := strconv.Itoa(status) + " " + title
	var body string
	switch PreferredOffer(accept) {
	case "text/html":
		h.Set("Content-Type", "text/html; charset=UTF-8")
		body = "<html>\n <head>\n  <title>" + line + "</title>\n </head>\n <body>\n  <h1>" + line + "</h1>\n  " +
			explanation + "<br /><br />\n\n\n\n </body>\n</html>"
	case "application/json":
		h.Set("Content-Type", "application/json")
		body = string(Dumps(webobJSON{explanation + "<br /><br />\n\n\n", line, title}))
	default:
		h.Set("Content-Type", "text/plain; charset=UTF-8")
		body = line + "\n\n" + explanation + "\n\n   "
	}
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = w.Write([]byte(body))
}

// webobJSON is webob's JSON page: message, code, title, in that order.
type webobJSON struct{ message, code, title string }

func (j webobJSON) EachMember(f func(k string, v any)) {
	f("message", j.message)
	f("code", j.code)
	f("title", j.title)
}

// PreferredOffer is webob's acceptable_offers(['text/html',
// 'application/json']) reduced to its first offer: "" when the header is
// absent or accepts neither.
func PreferredOffer(accept string) string {
	if strings.TrimSpace(accept) == "" {
		return ""
	}
	best, bestQ := "", 0.0
	for _, offer := range []string{"text/html", "application/json"} {
		q, spec := 0.0, -1
		for _, part := range strings.Split(accept, ",") {
			mt, params, err := mime.ParseMediaType(strings.TrimSpace(part))
			if err != nil {
				continue
			}
			s := -1
			switch {
			case mt == offer:
				s = 2
			case strings.HasSuffix(mt, "/*") && strings.HasPrefix(offer, strings.TrimSuffix(mt, "*")):
				s = 1
			case mt == "*/*":
				s = 0
			}
			if s > spec {
				spec, q = s, 1
				if qs, ok := params["q"]; ok {
					q, _ = strconv.ParseFloat(qs, 64)
				}
			}
		}
		if q > bestQ {
			best, bestQ = offer, q
		}
	}
	return best
}
