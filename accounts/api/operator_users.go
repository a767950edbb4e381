package api

import (
	"net/http"
)

// POST /timeblock/users {email, name?} → 201 {id, email, sessionToken}
func (o *Operator) createUser(w http.ResponseWriter, r *http.Request) error {
	var body struct {
		Email string `json:"email"`
		Name  string `json:"name"`
	}
	if err := decodeBody(w, r, o.opts.MaxBody, &body, false); err != nil {
		return err
	}
	u, token, err := o.svc.CreateUser(r.Context(), body.Email, body.Name)
	if err != nil {
		return err
	}
	writeData(w, http.StatusCreated, struct {
		ID           string `json:"id"`
		Email        string `json:"email"`
		SessionToken string `json:"sessionToken"`
	}{u.ID, u.Email, token})
	return nil
}

// POST /timeblock/users/{id}/sessions → 201 {sessionToken}
func (o *Operator) createSession(w http.ResponseWriter, r *http.Request) error {
	token, err := o.svc.CreateSession(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	writeData(w, http.StatusCreated, struct {
		SessionToken string `json:"sessionToken"`
	}{token})
	return nil
}
