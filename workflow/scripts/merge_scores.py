from horizon.placeholder import not_implemented

not_implemented("score", issue=4)
