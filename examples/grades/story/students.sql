INSERT INTO students VALUES (1, 'Alice'), (2, 'Bob')
