SELECT n.name FROM node n JOIN system s ON s.id = n.system_id WHERE s.name = '$system' ORDER BY 1
