package identity

import (
	"errors"
	"fmt"
	"sync"

	"golang.org/x/crypto/bcrypt"
)

// HashPassword returns the bcrypt hash to write as a user's
// password_hash (`berth identity hash-password`). bcrypt's default cost
// (10) takes some 50-100 ms a check: slow for a guesser, fine for a login.
func HashPassword(password string) (string, error) {
	if password == "" {
		return "", errors.New("identity: empty password")
	}
	h, err := bcrypt.GenerateFromPassword([]byte(password), bcrypt.DefaultCost)
	if err != nil {
		return "", fmt.Errorf("identity: hash password: %w", err)
	}
	return string(h), nil
}

// dummyHash is checked against when the user is unknown, so that an
// unknown user costs the same bcrypt work as a wrong password and the
// answer's timing does not tell which user names exist.
// It is made on first use: every program importing the package would
// otherwise pay its bcrypt work at start.
var dummyHash = sync.OnceValue(func() []byte {
	h, err := bcrypt.GenerateFromPassword([]byte("berth-no-such-user"), bcrypt.DefaultCost)
	if err != nil {
		panic(err) // only for a cost out of range, and DefaultCost is not
	}
	return h
})

// passwordMatches compares in constant time (bcrypt does); a nil u
// checks against dummyHash and fails.
func passwordMatches(u *user, password string) bool {
	if u == nil {
		_ = bcrypt.CompareHashAndPassword(dummyHash(), []byte(password))
		return false
	}
	return bcrypt.CompareHashAndPassword(u.hash, []byte(password)) == nil
}
