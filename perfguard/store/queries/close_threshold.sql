-- A threshold's row ends now (its history stays).
UPDATE threshold SET valid_to = now() WHERE id = %s
