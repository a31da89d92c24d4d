from horizon.placeholder import not_implemented

not_implemented("train", issue=3)
