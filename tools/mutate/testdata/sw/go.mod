module sw

go 1.26
