SELECT p.name FROM partition p JOIN system s ON s.id = p.system_id WHERE s.name = '$system' ORDER BY 1
