INSERT INTO acknowledgement (system, subject, reason, who) VALUES (%s, %s, %s, %s)
RETURNING id
