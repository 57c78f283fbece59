package web

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"go.uber.org/zap"
)

// AdminPasswordFile is where the generated admin password's bcrypt hash is
// kept, relative to the data directory.
const AdminPasswordFile = "web/admin-password.bcrypt"

// Where the admin password came from (AdminPassword's source).
const (
	PasswordFromEnv       = "environment" // XMQ_ADMIN_PASSWORD
	PasswordFromConfig    = "config"      // web.admin_password_hash
	PasswordFromDataDir   = "data_dir"    // generated at an earlier start
	PasswordGenerated     = "generated"   // generated now, printed once
	PasswordGeneratedTemp = "generated (memory only)"
)

// AdminPassword returns the admin's bcrypt hash, first found of: the
// password in envPassword (XMQ_ADMIN_PASSWORD), hashed now; configHash
// (web.admin_password_hash); the hash stored under dataDir by an earlier
// start. With none, it generates a password, logs it once at Warn and
// stores only its hash under dataDir (nowhere when dataDir is "": the
// password lasts until exit).
func AdminPassword(envPassword, configHash, dataDir string, log *zap.Logger) (hash []byte, source string, err error) {
	if log == nil {
		log = zap.NewNop()
	}
	switch {
	case envPassword != "":
		h, err := HashPassword(envPassword)
		if err != nil {
			return nil, "", fmt.Errorf("web: hashing XMQ_ADMIN_PASSWORD: %w", err)
		}
		return h, PasswordFromEnv, nil
	case configHash != "":
		h := []byte(configHash)
		if _, err := bcryptCost(h); err != nil {
			return nil, "", fmt.Errorf("web: admin_password_hash is not a bcrypt hash: %w", err)
		}
		return h, PasswordFromConfig, nil
	}
	var file string
	if dataDir != "" {
		file = filepath.Join(dataDir, filepath.FromSlash(AdminPasswordFile))
		data, err := os.ReadFile(file)
		switch {
		case err == nil:
			h := bytes.TrimSpace(data)
			if _, err := bcryptCost(h); err != nil {
				return nil, "", fmt.Errorf("web: %s is not a bcrypt hash (delete it to generate a new password): %w", file, err)
			}
			return h, PasswordFromDataDir, nil
		case !errors.Is(err, fs.ErrNotExist):
			return nil, "", fmt.Errorf("web: admin password: %w", err)
		}
	}
	password := randomToken(15) // 20 characters, 120 bits
	h, err := HashPassword(password)
	if err != nil {
		return nil, "", fmt.Errorf("web: hashing the generated password: %w", err)
	}
	source = PasswordGeneratedTemp
	if file != "" {
		if err := os.MkdirAll(filepath.Dir(file), 0o700); err != nil {
			return nil, "", fmt.Errorf("web: admin password: %w", err)
		}
		if err := os.WriteFile(file, append(h, '\n'), 0o600); err != nil {
			return nil, "", fmt.Errorf("web: admin password: %w", err)
		}
		source = PasswordGenerated
	}
	log.Warn("generated the dashboard's admin password; it is shown only this once (set XMQ_ADMIN_PASSWORD or web.admin_password_hash to choose one)",
		zap.String("password", password), zap.String("hash_file", file))
	return h, source, nil
}
